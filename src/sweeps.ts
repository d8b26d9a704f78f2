import type { Config } from './config';
import type { Sql } from './db/connect';
import { sweepIdempotencyKeys } from './domain/messages/idempotency';
import { sweepExpiredSignIns } from './domain/people/people';
import { pruneHistory } from './domain/messages/retention';
import { indexOlderMessages } from './domain/messages/message-search';
import { pruneOperatorNotices } from './domain/people/operator-webhooks';
import { sweepFiles } from './domain/files/files';
import type { Logger } from './log';

// The hourly clean-ups, run from graphile-worker's crontab by whichever worker takes each: expired
// sign-in codes and sessions, idempotency keys past their retention, history past its own, and
// operator notices as old as the attempt log's, and files no message carries (any more, or within
// FILE_UNATTACHED_HOURS).
// Each logs what it removed. And every minute, until it is done, the search index's catching up
// with the messages an upgrade found (message-search.ts).
// Less than the minute between runs, so that two never overlap.
const INDEXING_MS = 45_000;

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
          auditDays: config.AUDIT_RETENTION_DAYS,
        }),
      ),
    // Kept as long as the doorbells' attempt log.
    prune_operator_notices: async () =>
      log.info('operator_notices_pruned', { notices: await pruneOperatorNotices(sql, config.ATTEMPT_LOG_RETENTION_DAYS) }),
    // After prune_history, which may have deleted the last message carrying a file.
    sweep_files: async () => log.info('files_swept', { files: await sweepFiles(sql, config.FILE_UNATTACHED_HOURS) }),
    index_messages: async () => {
      const { indexed, done } = await indexOlderMessages(sql, INDEXING_MS);
      if (indexed > 0) log.info('messages_indexed', { indexed, done });
    },
  };
  // Spread over the hour so that they never run together.
  const crontab = ['0 * * * * sweep_sign_ins', '30 * * * * sweep_idempotency_keys', '45 * * * * prune_history', '50 * * * * prune_operator_notices', '55 * * * * sweep_files', '* * * * * index_messages'];
  return { tasks, crontab };
}
