// `bun bench/presence.ts` (or `BENCH_ONLY=presence bun run bench`): what presence costs the hot
// path, in one run on a fresh database. Two apps on the same database and pools, one tracking
// presence as the service does and one built without it (no last-seen hook, no held-request
// notices), driven alternately through
// app.handle() (no sockets, so that the difference is not lost in them), PRESENCE_RUNS times each
// (default 3), PRESENCE_SECONDS each:
// - authenticated reads (GET /api/threads, the key cached): what last seen adds to every request;
// - short waits (GET /api/deliveries?wait=0.05, answered empty) asked again at once in a loop: the
//   open and close of a held request, which presence hears.
// Each figure is requests answered per second and this process's CPU time per request (app and
// callers both: the same callers in both modes, and CPU time is less moved than throughput by other
// work on the machine), and, with presence, the statements presence sent meanwhile, to show that
// they follow the timers and the first opening and last closing, not the requests.
import { buildApp, type App } from '../src/app';
import { loadConfig } from '../src/config';
import { cacheAgents } from '../src/db/agent-cache';
import { connect } from '../src/db/connect';
import { listenForInbox } from '../src/db/inbox-signal';
import { createAgent } from '../src/domain/agents/agents';
import { trackPresence } from '../src/domain/agents/presence';
import { BY_CLI } from '../src/domain/people/audit';
import { silentLogger } from '../src/log';
import { freshDatabases } from './fresh-database';
import { median, round } from './stats';

const runs = Number(process.env.PRESENCE_RUNS ?? 3);
const seconds = Number(process.env.PRESENCE_SECONDS ?? 5);
const CONCURRENCY = 64;
const AGENTS = 64;
const progress = (line: string) => process.stderr.write(`${line}\n`);

const db = await freshDatabases();
const sql = connect(db.url, 20);
const config = loadConfig({ DATABASE_URL: db.url, HELD_REQUESTS_PER_AGENT: '1000' });
const inboxSignal = listenForInbox(sql, silentLogger);
const agentCache = cacheAgents(sql, silentLogger);
// Counts the statements presence sends: every call of its tagged template is one (it builds no
// fragments).
let statements = 0;
const counted = new Proxy(sql, {
  apply(target, self, args) {
    statements++;
    return Reflect.apply(target, self, args);
  },
});
const presence = trackPresence(counted, silentLogger);

try {
  await inboxSignal.start();
  await agentCache.start();
  await presence.start();
  const apps: Record<'with' | 'without', App> = {
    with: buildApp({ sql, config, log: silentLogger, inboxSignal, agentCache, presence }),
    without: buildApp({ sql, config, log: silentLogger, inboxSignal, agentCache, presence: null }),
  };
  const keys: string[] = [];
  for (let i = 0; i < AGENTS; i++) keys.push((await createAgent(sql, BY_CLI, { username: `bench-${i}` }, { allowLocal: true })).apiKey);

  // Requests answered per second for `ms` from CONCURRENCY callers, CPU µs per request, and the
  // statements presence sent (its last-seen flush included).
  const drive = async (app: App, path: string, ms: number) => {
    const sent = statements;
    const cpu = process.cpuUsage();
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
    const used = process.cpuUsage(cpu);
    await presence.flush();
    await presence.sync();
    return { perSecond: answered / (ms / 1000), cpuUs: (used.user + used.system) / answered, statements: statements - sent };
  };

  const scenarios = { reads: '/api/threads', waits: '/api/deliveries?wait=0.05' } as const;
  type Figures = { with: number[]; without: number[]; cpuWith: number[]; cpuWithout: number[]; statements: number[]; requests: number[] };
  const figures = Object.fromEntries(
    Object.keys(scenarios).map((s) => [s, { with: [], without: [], cpuWith: [], cpuWithout: [], statements: [], requests: [] }]),
  ) as unknown as Record<keyof typeof scenarios, Figures>;
  progress('warm-up');
  for (const path of Object.values(scenarios)) for (const app of Object.values(apps)) await drive(app, path, 1000);
  for (let r = 0; r < runs; r++) {
    for (const [name, path] of Object.entries(scenarios) as [keyof typeof scenarios, string][]) {
      for (const mode of r % 2 ? (['with', 'without'] as const) : (['without', 'with'] as const)) {
        const { perSecond, cpuUs, statements: sent } = await drive(apps[mode], path, seconds * 1000);
        const f = figures[name];
        f[mode].push(perSecond);
        (mode === 'with' ? f.cpuWith : f.cpuWithout).push(cpuUs);
        if (mode === 'with') {
          f.statements.push(sent);
          f.requests.push(perSecond * seconds);
        }
        progress(`run ${r + 1} ${name} ${mode} presence: ${round(perSecond)}/s, ${round(cpuUs)} µs CPU a request${mode === 'with' ? `, ${sent} presence statements` : ''}`);
      }
    }
  }

  console.log('| Scenario | Without presence: /s, CPU µs a request | With presence: /s, CPU µs a request | CPU with / without | Presence statements per run (requests) |');
  console.log('|---|---|---|---|---|');
  for (const [name, f] of Object.entries(figures)) {
    const label = name === 'reads' ? 'Authenticated reads' : 'Short waits, asked again at once';
    console.log(
      `| ${label} (${CONCURRENCY} callers, ${AGENTS} agents, ${seconds} s) | ${round(median(f.without))}, ${round(median(f.cpuWithout))} | ${round(median(f.with))}, ${round(median(f.cpuWith))} | ${round(median(f.cpuWith) / median(f.cpuWithout))} | ${median(f.statements)} (${round(median(f.requests), 0)}) |`,
    );
  }
  console.log(JSON.stringify(figures));
} finally {
  await presence.stop();
  await agentCache.stop();
  await inboxSignal.stop();
  await sql.end();
  await db.drop();
}
