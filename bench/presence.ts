// `bun bench/presence.ts` (or `BENCH_ONLY=presence bun run bench`): what presence costs the hot
// path, in one run on a fresh database. Two apps on the same database and pools, one tracking
// presence as the service does and one with presence left out, driven alternately through
// app.handle() (no sockets, so that the difference is not lost in them), PRESENCE_RUNS times each
// (default 3), PRESENCE_SECONDS each:
// - authenticated reads (GET /api/threads, the key cached): what last seen adds to every request;
// - short waits (GET /api/deliveries?wait=0.05, answered empty) asked again at once in a loop: the
//   open and close of a held request, which presence hears.
// Beside each figure, the rows presence wrote meanwhile (pg_stat_user_tables), to show that they
// follow the timers and not the requests.
import { buildApp, type App } from '../src/app';
import { loadConfig } from '../src/config';
import { cacheAgents } from '../src/db/agent-cache';
import { connect } from '../src/db/connect';
import { listenForInbox } from '../src/db/inbox-signal';
import { createAgent } from '../src/domain/agents/agents';
import { trackPresence, type Presence } from '../src/domain/agents/presence';
import { BY_CLI } from '../src/domain/people/audit';
import { silentLogger } from '../src/log';
import { freshDatabases } from './fresh-database';
import { median, round } from './stats';

const runs = Number(process.env.PRESENCE_RUNS ?? 3);
const seconds = Number(process.env.PRESENCE_SECONDS ?? 5);
const CONCURRENCY = 64;
const AGENTS = 64;
const progress = (line: string) => process.stderr.write(`${line}\n`);

// Presence left out: the baseline.
const absent: Presence = { seen() {}, opened() {}, closed() {}, start: async () => {}, stop: async () => {}, flush: async () => {}, sync: async () => {} };

const db = await freshDatabases();
const sql = connect(db.url, 20);
const config = loadConfig({ DATABASE_URL: db.url, HELD_REQUESTS_PER_AGENT: '1000' });
const inboxSignal = listenForInbox(sql, silentLogger);
const agentCache = cacheAgents(sql, silentLogger);
const presence = trackPresence(sql, silentLogger);

try {
  await inboxSignal.start();
  await agentCache.start();
  await presence.start();
  const apps: Record<'with' | 'without', App> = {
    with: buildApp({ sql, config, log: silentLogger, inboxSignal, agentCache, presence }),
    without: buildApp({ sql, config, log: silentLogger, inboxSignal, agentCache, presence: absent }),
  };
  const keys: string[] = [];
  for (let i = 0; i < AGENTS; i++) keys.push((await createAgent(sql, BY_CLI, { username: `bench-${i}` }, { allowLocal: true })).apiKey);

  const presenceRows = async () => {
    const [row] = await sql<{ n: number }[]>`
      select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::int as n from pg_stat_user_tables
      where relname in ('presence_connections', 'presence_instances', 'agent_last_seen')`;
    return row!.n;
  };
  // Requests answered per second for `ms` from CONCURRENCY callers, and the rows presence wrote.
  const drive = async (app: App, path: string, ms: number) => {
    const rowsBefore = await presenceRows();
    const until = performance.now() + ms;
    let answered = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, w) => {
        const headers = { authorization: `Bearer ${keys[w % AGENTS]}` };
        while (performance.now() < until) {
          const res = await app.handle(new Request(`http://localhost${path}`, { headers }));
          if (res.status !== 200) throw new Error(`${path} answered ${res.status}`);
          await res.arrayBuffer();
          answered++;
        }
      }),
    );
    await presence.flush();
    // pg_stat_user_tables is updated when a backend reports, within about a second.
    await Bun.sleep(1_100);
    return { perSecond: answered / (ms / 1000), rows: (await presenceRows()) - rowsBefore };
  };

  const scenarios = { reads: '/api/threads', waits: '/api/deliveries?wait=0.05' } as const;
  const figures = Object.fromEntries(Object.keys(scenarios).map((s) => [s, { with: [] as number[], without: [] as number[], rows: [] as number[] }])) as Record<
    keyof typeof scenarios,
    { with: number[]; without: number[]; rows: number[] }
  >;
  progress('warm-up');
  for (const path of Object.values(scenarios)) for (const app of Object.values(apps)) await drive(app, path, 1000);
  for (let r = 0; r < runs; r++) {
    for (const [name, path] of Object.entries(scenarios) as [keyof typeof scenarios, string][]) {
      for (const mode of r % 2 ? (['with', 'without'] as const) : (['without', 'with'] as const)) {
        const { perSecond, rows } = await drive(apps[mode], path, seconds * 1000);
        figures[name][mode].push(perSecond);
        if (mode === 'with') figures[name].rows.push(rows);
        progress(`run ${r + 1} ${name} ${mode} presence: ${round(perSecond)}/s${mode === 'with' ? `, ${rows} presence rows written` : ''}`);
      }
    }
  }

  console.log('| Scenario | Without presence (/s) | With presence (/s) | With / without | Presence rows written per run |');
  console.log('|---|---|---|---|---|');
  for (const [name, f] of Object.entries(figures)) {
    console.log(`| ${name === 'reads' ? 'Authenticated reads' : 'Short waits, asked again at once'} (${CONCURRENCY} callers, ${AGENTS} agents, ${seconds} s) | ${round(median(f.without))} | ${round(median(f.with))} | ${round(median(f.with) / median(f.without))} | ${median(f.rows)} |`);
  }
  console.log(JSON.stringify(figures));
} finally {
  await presence.stop();
  await agentCache.stop();
  await inboxSignal.stop();
  await sql.end();
  await db.drop();
}
