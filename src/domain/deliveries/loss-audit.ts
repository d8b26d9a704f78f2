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

// Which messages a run checks for deliveries: those given their id since `sinceMs`, and the lost
// ones an earlier run found (`recheck`), so that one repaired or deleted stops counting.
export type MessageCheck = { sinceMs: number; recheck: string[] };
// Every message of the window.
export const WHOLE_WINDOW: MessageCheck = { sinceMs: 0, recheck: [] };

// One statement, every part on an index: messages by primary-key range and deliveries by their
// (message, recipient) key; owed doorbells on the partial index of accepted webhook deliveries.
// Besides the counts, the ids of up to `remember` lost messages, for the next run to check again.
export async function auditLoss(
  sql: Sql,
  { thresholdMs, windowMs }: AuditOptions,
  check: MessageCheck = WHOLE_WINDOW,
  remember = 0,
): Promise<LossAudit & { lost: string[] }> {
  const windowStart = firstIdAt(Date.now() - windowMs);
  const withoutDeliveries = sql`not exists (select 1 from deliveries d where d.message_id = m.id)`;
  // Two statements, not one with a range that is sometimes the day and sometimes minutes, so that
  // each keeps the plan that suits it (PostgreSQL's plan cache, per statement).
  const lost =
    check === WHOLE_WINDOW
      ? sql`select m.id from messages m where m.id >= ${windowStart}::uuid and ${withoutDeliveries}`
      : sql`
        select m.id from messages m
        where m.id >= ${firstIdAt(Math.max(Date.now() - windowMs, check.sinceMs))}::uuid and ${withoutDeliveries}
        union
        select m.id from messages m
        where m.id = any(${check.recheck}::uuid[]) and m.id >= ${windowStart}::uuid and ${withoutDeliveries}`;
  const [row] = await sql<{ messages: number; lost: string[]; withoutJob: number; overdue: number; checkedAt: Date }[]>`
    with lost as (${lost})
    select
      (select count(*)::int from lost) as messages,
      array(select id from lost order by id limit ${remember}) as lost,
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
    lost: row!.lost,
  };
}

// Counting the whole window at every run scanned a day's messages each minute in every process
// (1.2 s of PostgreSQL CPU at a million: docs/internals/scaling.md). A message that had its
// deliveries when a run checked it has them still, unless someone deletes them by hand, so a run
// checks only the messages given their id since shortly before the previous run began, and the
// whole window is checked once an hour, which finds such a hand edit.
export const WHOLE_WINDOW_EVERY_MS = 3_600_000;
// How long before a run a message may have been given its id and yet be committed after the run
// read: far longer than any statement that writes one takes (STATEMENT_TIMEOUT_MS bounds them).
const COMMIT_MARGIN_MS = 600_000;
// Lost messages remembered, and checked again at each run; past this many, each run checks the
// whole window, as then only a whole count is exact.
const REMEMBERED_LOST = 1_000;

export const hasDrift = (audit: LossAudit) =>
  audit.messagesWithoutDeliveries + audit.doorbellsWithoutJob + audit.doorbellsOverdue > 0;

export type LossAuditor = { latest(): LossAudit | null; run(): Promise<LossAudit | null>; start(): void; stop(): void };

// Runs the loss audit every `intervalMs` in this process, from start(), and keeps the latest result
// for /health/details and the metrics. Drift is logged as an error each time it is seen; an audit
// the database could not answer, or stopped at its time bound, is a warning, and the previous
// result stands. A service starts it once its own start is done: a first run during the start held
// the query pool's one connection while a step needed it, and the pool opened a second, out of the
// order a start opens them. Its first run, and one each `wholeWindowEveryMs`, checks every message
// of the window; the others, the newer ones (above).
export function lossAuditor(
  sql: Sql,
  log: Logger,
  { intervalMs, wholeWindowEveryMs = WHOLE_WINDOW_EVERY_MS, ...options }: AuditOptions & { intervalMs: number; wholeWindowEveryMs?: number },
): LossAuditor {
  let latest: LossAudit | null = null;
  let timer: ReturnType<typeof setInterval> | null = null;
  // Where the next run may start checking, and the lost it must check again; none: the whole window.
  let next: MessageCheck | null = null;
  let wholeWindowAt = 0;
  const run = async () => {
    const startedAt = Date.now();
    const whole = next === null || startedAt - wholeWindowAt >= wholeWindowEveryMs;
    try {
      const { lost, ...audit } = await auditLoss(sql, options, whole ? WHOLE_WINDOW : next!, REMEMBERED_LOST);
      latest = audit;
      if (whole) wholeWindowAt = startedAt;
      next = audit.messagesWithoutDeliveries > REMEMBERED_LOST ? null : { sinceMs: startedAt - COMMIT_MARGIN_MS, recheck: lost };
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

export function startLossAudit(sql: Sql, log: Logger, options: AuditOptions & { intervalMs: number; wholeWindowEveryMs?: number }): LossAuditor {
  const auditor = lossAuditor(sql, log, options);
  auditor.start();
  return auditor;
}
