import type { Agent } from '../domain/agents/actors';
import type { Logger } from '../log';
import type { Sql } from './connect';
import { trackKeyUse } from './key-use';

// The database notifies this channel with an agent's id whenever what its keys authenticate as
// changes: archived or unarchived, a key revoked or given another expiry, a new name, deleted
// (sql/007_agent_changes_notify.sql, sql/032_agent_keys.sql).
export const AGENTS_CHANNEL = 'ams_agents';
const DEFAULT_SIZE = 5_000;
// A backstop, not the revocation path: should a notification ever go unheard without the listener
// noticing, an entry still answers for at most this long.
const DEFAULT_TTL_MS = 60_000;

// Authenticated agents by key hash, so that a request need not look its key up again. Only
// successes are kept, only while this process hears the agents channel, and only for the time to
// live, and never past the key's expiry: a change by any writer evicts the agent everywhere the
// moment it commits. It also notes each key's use, written once a minute (src/db/key-use.ts).
export type AgentCache = {
  get(keyHash: string): Agent | undefined;
  // Taken before the lookup and handed back to remember(): an answer read before an eviction that
  // happened meanwhile would otherwise be cached after it, stale for good.
  version(): number;
  remember(keyHash: string, agent: Agent, since: number, keyExpiresAt?: Date | null): void;
  used(keyId: string, prefix: string): void;
  // Drops the agent here at once, for a change this process made itself: the database's notice
  // follows a moment later, and the next request must not come first.
  forget(agent: { id: string } | { username: string }): void;
};

export type AgentCacheListener = AgentCache & { start(): Promise<void>; stop(): Promise<void>; size(): number; flushKeyUse(): Promise<void> };

// A bounded map in least-recently-used order. It shares the process's one LISTEN connection
// (postgres.js keeps one per sql instance for every channel). Notifications sent while that
// connection was down are lost, so every (re)connect empties the cache.
export function cacheAgents(
  sql: Sql,
  log: Logger,
  { maxSize = DEFAULT_SIZE, ttlMs = DEFAULT_TTL_MS }: { maxSize?: number; ttlMs?: number } = {},
): AgentCacheListener {
  const byKey = new Map<string, { agent: Agent; expiresAt: number }>();
  const keyUse = trackKeyUse(sql, log);
  let generation = 0;
  let listening = false;
  let listens = 0;
  let unlisten: (() => Promise<void>) | null = null;

  const clear = () => {
    generation++;
    byKey.clear();
  };
  const evict = (agentId: string) => {
    generation++;
    for (const [keyHash, entry] of byKey) if (entry.agent.id === agentId) byKey.delete(keyHash);
  };

  return {
    get(keyHash) {
      const entry = byKey.get(keyHash);
      if (!entry) return undefined;
      byKey.delete(keyHash);
      if (entry.expiresAt <= performance.now()) return undefined;
      byKey.set(keyHash, entry);
      return entry.agent;
    },
    version: () => generation,
    remember(keyHash, agent, since, keyExpiresAt) {
      if (!listening || since !== generation) return;
      const lasts = keyExpiresAt ? Math.min(ttlMs, keyExpiresAt.getTime() - Date.now()) : ttlMs;
      byKey.set(keyHash, { agent, expiresAt: performance.now() + lasts });
      if (byKey.size > maxSize) byKey.delete(byKey.keys().next().value!);
    },
    used: keyUse.used,
    forget(agent) {
      generation++;
      for (const [keyHash, entry] of byKey) if ('id' in agent ? entry.agent.id === agent.id : entry.agent.username === agent.username) byKey.delete(keyHash);
    },
    flushKeyUse: keyUse.flush,
    async start() {
      keyUse.start();
      const listen = await sql.listen(AGENTS_CHANNEL, evict, () => {
        clear();
        listening = true;
        if (listens++ > 0) log.info('agent_cache_listener_reconnected');
      });
      unlisten = listen.unlisten;
    },
    async stop() {
      listening = false;
      clear();
      await keyUse.stop();
      await unlisten?.().catch(() => {});
      unlisten = null;
    },
    size: () => byKey.size,
  };
}
