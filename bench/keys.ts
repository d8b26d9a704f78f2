// `bun bench/keys.ts` (or `BENCH_ONLY=keys bun run bench`): what several keys cost authentication,
// in one run on a fresh database.
// - A cached key (every request after an agent's first on an instance): noting its last use in
//   memory against not noting it, alternating, KEYS_RUNS times each (default 3), KEYS_CALLS calls each.
// - A key looked up (the first request, or after an eviction): the lookup through agent_keys.
// - The once-a-minute write of last uses, for KEYS_AGENTS keys noted (default 1 000).
import { cacheAgents, type AgentCache } from '../src/db/agent-cache';
import { connect } from '../src/db/connect';
import { authenticateAgent } from '../src/domain/agents/authentication';
import { createAgent } from '../src/domain/agents/agents';
import { BY_CLI } from '../src/domain/people/audit';
import { silentLogger } from '../src/log';
import { freshDatabases } from './fresh-database';
import { median, round } from './stats';

const runs = Number(process.env.KEYS_RUNS ?? 3);
const calls = Number(process.env.KEYS_CALLS ?? 200_000);
const agents = Number(process.env.KEYS_AGENTS ?? 1_000);
const progress = (line: string) => process.stderr.write(`${line}\n`);

const db = await freshDatabases();
const sql = connect(db.url, 10);
const cache = cacheAgents(sql, silentLogger);
await cache.start();
try {
  const keys: string[] = [];
  for (let i = 0; i < agents; i++) keys.push((await createAgent(sql, BY_CLI, { username: `bench-${i}` }, { allowLocal: true })).apiKey);
  const header = (key: string) => `Bearer ${key}`;

  // Every key looked up once: the lookup's cost, and the cache warmed for what follows.
  const lookups = performance.now();
  for (const key of keys) await authenticateAgent(sql, cache, header(key));
  const lookupUs = ((performance.now() - lookups) * 1000) / keys.length;

  const notUsed: AgentCache = { ...cache, used: () => {} };
  const cachedUs = async (c: AgentCache) => {
    const started = performance.now();
    for (let i = 0; i < calls; i++) await authenticateAgent(sql, c, header(keys[i % keys.length]!));
    return ((performance.now() - started) * 1000) / calls;
  };
  const noted: number[] = [];
  const plain: number[] = [];
  for (let r = 0; r < runs; r++) {
    plain.push(await cachedUs(notUsed));
    noted.push(await cachedUs(cache));
    progress(`run ${r + 1}: ${round(plain.at(-1)!, 2)} µs without noting, ${round(noted.at(-1)!, 2)} µs noting`);
  }
  const flushStarted = performance.now();
  await cache.flushKeyUse();
  const flushMs = performance.now() - flushStarted;
  const [written] = await sql<{ n: number }[]>`select count(*)::int as n from agent_keys where last_used_at is not null`;

  console.log(
    JSON.stringify({
      cachedAuthenticationUs: { withoutNoting: round(median(plain), 2), noting: round(median(noted), 2) },
      lookupUs: round(lookupUs, 1),
      flush: { keys: written!.n, ms: round(flushMs, 1) },
    }),
  );
} finally {
  await cache.stop();
  await sql.end({ timeout: 1 });
  await db.drop();
}
