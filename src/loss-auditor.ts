import type { Sql } from './db/connect';
import { isDatabaseUnavailable } from './db/unavailable';
import { auditLoss, hasDrift, type AuditOptions, type LossAudit } from './domain/loss-audit';
import type { Logger } from './log';

export type LossAuditor = { latest(): LossAudit | null; run(): Promise<LossAudit | null>; stop(): void };

// Runs the loss audit every `intervalMs` in this process and keeps the latest result for
// /health/details and the metrics. Drift is logged as an error each time it is seen; an audit the
// database could not answer is a warning, and the previous result stands.
export function startLossAudit(sql: Sql, log: Logger, { intervalMs, ...options }: AuditOptions & { intervalMs: number }): LossAuditor {
  let latest: LossAudit | null = null;
  const run = async () => {
    try {
      latest = await auditLoss(sql, options);
      if (hasDrift(latest)) log.error('loss_audit_drift', { ...latest });
    } catch (error) {
      log[isDatabaseUnavailable(error) ? 'warn' : 'error']('loss_audit_failed', { error: (error as Error).message });
    }
    return latest;
  };
  const timer = setInterval(run, intervalMs);
  timer.unref();
  void run();
  return { latest: () => latest, run, stop: () => clearInterval(timer) };
}
