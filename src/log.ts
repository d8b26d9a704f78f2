import type { Config } from './config';

// One JSON line per event on stderr. Callers pass only what is safe to keep: ids, usernames,
// statuses and durations — never keys, secrets, session tokens or message bodies.
type Level = Config['LOG_LEVEL'];
const rank: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export type Logger = {
  [L in Level]: (event: string, fields?: Record<string, unknown>) => void;
};

export function createLogger(level: Level = 'info', write: (line: string) => void = (l) => process.stderr.write(l + '\n')): Logger {
  const emit = (at: Level) => (event: string, fields: Record<string, unknown> = {}) => {
    if (rank[at] < rank[level]) return;
    write(JSON.stringify({ time: new Date().toISOString(), level: at, event, ...fields }));
  };
  return { debug: emit('debug'), info: emit('info'), warn: emit('warn'), error: emit('error') };
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

// The same logger, adding `fields` to every line it writes.
export function withFields(log: Logger, fields: Record<string, unknown>): Logger {
  const at = (level: Level) => (event: string, more: Record<string, unknown> = {}) => log[level](event, { ...fields, ...more });
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}
