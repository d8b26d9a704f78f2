import type { Config } from './config';
import type { Sql } from './db/connect';
import { sweepIdempotencyKeys } from './domain/messages/idempotency';
import { sweepExpiredSignIns } from './domain/people/people';
import { pruneHistory } from './domain/messages/retention';
import type { Logger } from './log';

// The hourly clean-ups, run from graphile-worker's crontab by whichever worker takes each: expired
// sign-in codes and sessions, idempotency keys past their retention, and history past its own.
// Each logs what it removed.
export function sweeps(sql: Sql, log: Logger, config: Config) {
  const tasks = {
    sweep_sign_ins: async () => log.info('sign_ins_swept', await sweepExpiredSignIns(sql)),
    sweep_idempotency_keys: async () =>
      log.info('idempotency_keys_swept', await sweepIdempotencyKeys(sql, config.IDEMPOTENCY_RETENTION_MS)),
    prune_history: async () =>
      log.info(
        'history_pruned',
        await pruneHistory(sql, {
          attemptLogDays: config.ATTEMPT_LOG_RETENTION_DAYS,
          deadJobDays: config.DEAD_JOB_RETENTION_DAYS,
          messageDays: config.MESSAGE_RETENTION_DAYS ?? null,
          eventHours: config.EVENT_RETENTION_HOURS,
        }),
      ),
  };
  // Spread over the hour so that they never run together.
  const crontab = ['0 * * * * sweep_sign_ins', '30 * * * * sweep_idempotency_keys', '45 * * * * prune_history'];
  return { tasks, crontab };
}
