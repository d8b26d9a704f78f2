import type { Logger } from '../log';
import type { Sql } from './connect';

// The database notifies this channel with an agent's id whenever what its key authenticates as
// changes: archived or unarchived, a new key, a new name, deleted (sql/007_agent_changes_notify.sql).
export const AGENTS_CHANNEL = 'ams_agents';
const DEFAULT_SIZE = 5_000;
// A backstop, not the revocation path: should a notification ever go unheard without the listener
// noticing, an entry still answers for at most this long.
const DEFAULT_TTL_MS = 60_000;

type CachedAgent = { id: string; username: string };

// Authenticated agents by key hash, so that a request need not look its key up again. Only
// successes are kept, only while this process hears the agents channel, and only for the time to
// live: a change by any writer evicts the agent everywhere the moment it commits.
export type AgentCache = {
  get(keyHash: string): CachedAgent | undefined;
  // Taken before the lookup and handed back to remember(): an answer read before an eviction that
  // happened meanwhile would otherwise be cached after it, stale for good.
  version(): number;
  remember(keyHash: string, agent: CachedAgent, since: number): void;
};

export type AgentCacheListener = AgentCache & { start(): Promise<void>; stop(): Promise<void>; size(): number };

// A bounded map in least-recently-used order. It shares the process's one LISTEN connection
// (postgres.js keeps one per sql instance for every channel). Notifications sent while that
// connection was down are lost, so every (re)connect empties the cache.
export function cacheAgents(
  sql: Sql,
  log: Logger,
  { maxSize = DEFAULT_SIZE, ttlMs = DEFAULT_TTL_MS }: { maxSize?: number; ttlMs?: number } = {},
): AgentCacheListener {
  const byKey = new Map<string, { agent: CachedAgent; expiresAt: number }>();
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
    remember(keyHash, agent, since) {
      if (!listening || since !== generation) return;
      byKey.set(keyHash, { agent, expiresAt: performance.now() + ttlMs });
      if (byKey.size > maxSize) byKey.delete(byKey.keys().next().value!);
    },
    async start() {
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
      await unlisten?.().catch(() => {});
      unlisten = null;
    },
    size: () => byKey.size,
  };
}
