import type { Logger } from '../log';
import type { Sql } from './connect';

// Anything that changes what an agent's key authenticates as (archiving, for now) runs
// pg_notify on this channel with the agent's id, in the same statement as the change.
export const AGENTS_CHANNEL = 'ams_agents';
const DEFAULT_SIZE = 5_000;

type CachedAgent = { id: string; username: string };

// Authenticated agents by key hash, so that a request need not look its key up again. Only
// successes are kept, and only while this process hears the agents channel: a change on any
// instance (or from the CLI) evicts the agent everywhere the moment it commits.
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
export function cacheAgents(sql: Sql, log: Logger, max = DEFAULT_SIZE): AgentCacheListener {
  const byKey = new Map<string, CachedAgent>();
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
    for (const [keyHash, agent] of byKey) if (agent.id === agentId) byKey.delete(keyHash);
  };

  return {
    get(keyHash) {
      const agent = byKey.get(keyHash);
      if (agent) {
        byKey.delete(keyHash);
        byKey.set(keyHash, agent);
      }
      return agent;
    },
    version: () => generation,
    remember(keyHash, agent, since) {
      if (!listening || since !== generation) return;
      byKey.set(keyHash, agent);
      if (byKey.size > max) byKey.delete(byKey.keys().next().value!);
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
