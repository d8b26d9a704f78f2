import type { Logger } from '../log';
import type { Sql } from './connect';

// How often each instance writes the keys it saw used; also the coarseness of a key's last use.
export const KEY_USE_FLUSH_MS = 60_000;

// A key's last use, coarse and off the request's path: a request only notes its key in this
// process's memory, and once a minute one statement writes every key noted since. The statement
// leaves a key alone whose stored use is less than a minute older, so that however many instances
// note it, a key's row is written at most about once a minute. A key made before keys had prefixes
// gets its prefix with its first write.
export function trackKeyUse(sql: Sql, log: Logger, flushMs = KEY_USE_FLUSH_MS) {
  let noted = new Map<string, { at: number; prefix: string }>();
  let timer: ReturnType<typeof setInterval> | null = null;

  const flush = async () => {
    if (noted.size === 0) return;
    const batch = [...noted];
    noted = new Map();
    await sql`
      update agent_keys k set last_used_at = u.at, prefix = coalesce(k.prefix, u.prefix)
      from unnest(${batch.map(([id]) => id)}::uuid[], ${batch.map(([, u]) => new Date(u.at).toISOString())}::timestamptz[], ${batch.map(([, u]) => u.prefix)}::text[])
           as u(id, at, prefix)
      where k.id = u.id and (k.last_used_at is null or k.last_used_at < u.at - interval '1 minute' or k.prefix is null)`.catch((error: Error) =>
      log.warn('key_use_not_written', { keys: batch.length, error: error.message }),
    );
  };

  return {
    used(keyId: string, prefix: string) {
      noted.set(keyId, { at: Date.now(), prefix });
    },
    flush,
    start() {
      timer ??= setInterval(() => void flush(), flushMs);
    },
    async stop() {
      if (timer) clearInterval(timer);
      timer = null;
      await flush();
    },
  };
}
