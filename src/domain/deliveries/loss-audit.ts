import type { Sql } from '../../db/connect';
import { isDatabaseUnavailable, isStatementStopped } from '../../db/unavailable';
import type { Logger } from '../../log';
import { owesDoorbell } from './delivery-steps';
import { firstIdAt } from '../shared/ids';
import { hasLiveNotifyJob, hasOverdueNotifyJob } from './notify-jobs';

// What "nothing is lost" means, counted. Each figure should be 0; anything else is drift that an
// operator must see before an agent complains.
export type LossAudit = {
  // Messages accepted within the window that have no delivery at all. A post writes a message only
  // together with its deliveries, in one statement, and only when someone will receive it.
  messagesWithoutDeliveries: number;
  // Deliveries owed a doorbell, older than the threshold, with no doorbell job queued or running:
  // nothing would ring them until the re-publish sweep finds them.
  doorbellsWithoutJob: number;
  // Deliveries owed a doorbell whose job fell due more than the threshold ago and that no worker
  // has taken: no worker is running, or none keeps up.
  doorbellsOverdue: number;
  checkedAt: string;
};

export type AuditOptions = { thresholdMs: number; windowMs: number };

// One statement, every part on an index: messages by primary-key range and deliveries by their
// (message, recipient) key; owed doorbells on the partial index of accepted webhook deliveries.
export async function auditLoss(sql: Sql, { thresholdMs, windowMs }: AuditOptions): Promise<LossAudit> {
  const [row] = await sql<{ messages: number; withoutJob: number; overdue: number; checkedAt: Date }[]>`
    select
      (select count(*)::int from messages m
       where m.id >= ${firstIdAt(Date.now() - windowMs)}::uuid
         and not exists (select 1 from deliveries d where d.message_id = m.id)) as messages,
      (select count(*)::int from deliveries d join agents a on a.id = d.recipient_id
       where ${owesDoorbell(sql)} and d.created_at < now() - ${thresholdMs} * interval '1 millisecond'
         and not ${hasLiveNotifyJob(sql)}) as "withoutJob",
      (select count(*)::int from deliveries d join agents a on a.id = d.recipient_id
       where ${owesDoorbell(sql)} and ${hasOverdueNotifyJob(sql, thresholdMs)}) as overdue,
      now() as "checkedAt"`;
  return {
    messagesWithoutDeliveries: row!.messages,
    doorbellsWithoutJob: row!.withoutJob,
    doorbellsOverdue: row!.overdue,
    checkedAt: row!.checkedAt.toISOString(),
  };
}

export const hasDrift = (audit: LossAudit) =>
  audit.messagesWithoutDeliveries + audit.doorbellsWithoutJob + audit.doorbellsOverdue > 0;

export type LossAuditor = { latest(): LossAudit | null; run(): Promise<LossAudit | null>; start(): void; stop(): void };

// Runs the loss audit every `intervalMs` in this process, from start(), and keeps the latest result
// for /health/details and the metrics. Drift is logged as an error each time it is seen; an audit
// the database could not answer, or stopped at its time bound, is a warning, and the previous
// result stands. A service starts it once its own start is done: a first run during the start held
// the query pool's one connection while a step needed it, and the pool opened a second, out of the
// order a start opens them.
export function lossAuditor(sql: Sql, log: Logger, { intervalMs, ...options }: AuditOptions & { intervalMs: number }): LossAuditor {
  let latest: LossAudit | null = null;
  let timer: ReturnType<typeof setInterval> | null = null;
  const run = async () => {
    try {
      latest = await auditLoss(sql, options);
      if (hasDrift(latest)) log.error('loss_audit_drift', { ...latest });
    } catch (error) {
      log[isDatabaseUnavailable(error) || isStatementStopped(error) ? 'warn' : 'error']('loss_audit_failed', { error: (error as Error).message });
    }
    return latest;
  };
  const start = () => {
    if (timer) return;
    timer = setInterval(run, intervalMs);
    timer.unref();
    void run();
  };
  const stop = () => {
    if (timer) clearInterval(timer);
    timer = null;
  };
  return { latest: () => latest, run, start, stop };
}

export function startLossAudit(sql: Sql, log: Logger, options: AuditOptions & { intervalMs: number }): LossAuditor {
  const auditor = lossAuditor(sql, log, options);
  auditor.start();
  return auditor;
}
