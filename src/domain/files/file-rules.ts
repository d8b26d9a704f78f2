import { numericDefault, type Config } from '../../config';
import type { Sql } from '../../db/connect';

// What the deployment's settings make of files (FILE_*, FILES_PER_MESSAGE): the largest upload,
// each agent's quota of stored bytes (0: none) and how many files a message carries. How long a
// file no message carries is kept is the sweep's (sweeps.ts), which runs in the worker.
export type FileRules = { maxBytes: number; quotaBytes: number; perMessage: number };

export const fileRules = (config: Pick<Config, 'FILE_MAX_BYTES' | 'FILE_QUOTA_BYTES' | 'FILES_PER_MESSAGE'>): FileRules => ({
  maxBytes: config.FILE_MAX_BYTES,
  quotaBytes: config.FILE_QUOTA_BYTES,
  perMessage: config.FILES_PER_MESSAGE,
});

const DEFAULT_FILE_RULES = fileRules({
  FILE_MAX_BYTES: numericDefault('FILE_MAX_BYTES'),
  FILE_QUOTA_BYTES: numericDefault('FILE_QUOTA_BYTES'),
  FILES_PER_MESSAGE: numericDefault('FILES_PER_MESSAGE'),
});

// One set per connection pool, set by the process that serves through it (app.ts), as the send
// rules are (messages/send-rules.ts).
const rules = new WeakMap<Sql, FileRules>();

export function governFiles(sql: Sql, set: FileRules): void {
  rules.set(sql, set);
}

export const fileRulesFor = (sql: Sql): FileRules => rules.get(sql) ?? DEFAULT_FILE_RULES;
