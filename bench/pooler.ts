// `bun bench/pooler.ts`: the service behind PgBouncer in transaction mode (Debian's, as
// test/pooler.test.ts starts it), against the same service connected directly, in one run on one
// fresh PostgreSQL. One instance direct, then 1 to 4 instances through the pooler (each
// `bench/server.ts` with its inline worker), posts spread over them round-robin by 32 concurrent
// clients for POOLER_SECONDS (5) each, every post ringing a doorbell at a local handler. Reports
// posts per second, the most connections PostgreSQL held for the database, and CPU per post of the
// instances, PgBouncer and PostgreSQL. Writes bench/pooler.json.
import { connect } from '../src/db/connect';
import { createAgent } from '../src/domain/agents/agents';
import { BY_CLI } from '../src/domain/people/audit';
import { startPgBouncer } from '../test/support/pgbouncer';
import { databaseCpuMs, postmasterPid, processCpuMs } from './cpu';
import { freshDatabases } from './fresh-database';
import { startInstance } from './instance';

const root = new URL('..', import.meta.url).pathname;
const SECONDS = Number(process.env.POOLER_SECONDS ?? 5);
const CLIENTS = 32;
const BOUNCER_PORT = Number(process.env.POOLER_BENCH_PORT ?? 55452);
const BOUNCER_POOL = 10;

const db = await freshDatabases();
const databasePid = await postmasterPid(db.url);
const sql = connect(db.url, 2);
await sql.unsafe(`alter database ${new URL(db.url).pathname.slice(1)} set statement_timeout = '30000ms'`);
const bouncer = await startPgBouncer(db.url, { port: BOUNCER_PORT, poolSize: BOUNCER_POOL });
let rung = 0;
const handler = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => (rung++, new Response('ok')) });


const cpuMs = (instances: number[]) => ({
  instances: instances.reduce((n, pid) => n + processCpuMs(pid), 0),
  pgbouncer: processCpuMs(bouncer.pid),
  database: databasePid === null ? NaN : databaseCpuMs(databasePid),
});

const direct = { DATABASE_URL: db.url };
const pooled = { DATABASE_URL: bouncer.url, DATABASE_DIRECT_URL: db.url };
const phases: { through: 'direct' | 'pgbouncer'; instances: number }[] = [
  { through: 'direct', instances: 1 },
  ...[1, 2, 3, 4].map((instances) => ({ through: 'pgbouncer' as const, instances })),
];
const results: Record<string, unknown>[] = [];
for (const [index, phase] of phases.entries()) {
  const instances = await Promise.all(Array.from({ length: phase.instances }, () => startInstance(phase.through === 'direct' ? direct : pooled, 'inherit')));
  const sender = await createAgent(sql, BY_CLI, { username: `pooler-sender-${index}` }, { allowLocal: true });
  const hooked = await createAgent(sql, BY_CLI, { username: `pooler-hooked-${index}`, webhookUrl: `http://127.0.0.1:${handler.port}/h` }, { allowLocal: true });
  // It posts far past the default quota: counted, never refused.
  await sql`update agents set messages_per_minute = 100000000 where username = ${sender.username}`;
  const headers = { authorization: `Bearer ${sender.apiKey}`, 'content-type': 'application/json' };
  const opened = await fetch(`${instances[0]!.base}/api/threads`, { method: 'POST', headers, body: JSON.stringify({ title: 'pooler', participantUsernames: [hooked.username] }) });
  const threadId = ((await opened.json()) as { data: { id: string } }).data.id;
  rung = 0;
  let posted = 0;
  let refused = 0;
  let turn = 0;
  let connections = 0;
  const sampler = setInterval(async () => {
    const [row] = await sql`select count(*)::int as n from pg_stat_activity where datname = current_database() and backend_type = 'client backend'`;
    connections = Math.max(connections, row!.n);
  }, 250);
  const before = cpuMs(instances.map((i) => i.pid));
  const started = performance.now();
  const until = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < until) {
        const base = instances[turn++ % instances.length]!.base;
        const res = await fetch(`${base}/api/threads/${threadId}/messages`, { method: 'POST', headers, body: '{"content":"pooled"}' });
        await res.arrayBuffer();
        if (res.status === 201) posted++;
        else refused++;
      }
    }),
  );
  const after = cpuMs(instances.map((i) => i.pid));
  const seconds = (performance.now() - started) / 1000;
  const drainStart = performance.now();
  while (rung < posted && performance.now() - drainStart < 30_000) await Bun.sleep(100);
  clearInterval(sampler);
  const perPost = (key: keyof typeof before) => Math.round(((after[key] - before[key]) * 1000) / posted);
  results.push({
    through: phase.through,
    instances: phase.instances,
    postsPerSecond: Math.round(posted / seconds),
    notOk: refused,
    doorbellsRung: rung === posted,
    // This bench's own two connections included.
    peakConnections: connections,
    cpuPerPostUs: { instances: perPost('instances'), pgbouncer: phase.through === 'direct' ? 0 : perPost('pgbouncer'), database: perPost('database') },
  });
  process.stderr.write(`${JSON.stringify(results.at(-1))}\n`);
  await Promise.all(instances.map((i) => i.stop()));
}

const machine = { cores: navigator.hardwareConcurrency, postgres: (await sql`show server_version`)[0]!.server_version, pgbouncer: '1.18.0' };
await Bun.write(`${root}bench/pooler.json`, JSON.stringify({ machine, seconds: SECONDS, clients: CLIENTS, pgbouncerPool: BOUNCER_POOL, results }, null, 2) + '\n');
console.log(
  ['| Through | Instances | Posts/s | Peak PostgreSQL connections | CPU per post: instances / PgBouncer / PostgreSQL (µs) |', '|---|---|---|---|---|']
    .concat(
      results.map((r) => {
        const c = r.cpuPerPostUs as { instances: number; pgbouncer: number; database: number };
        return `| ${r.through} | ${r.instances} | ${r.postsPerSecond} | ${r.peakConnections} | ${c.instances} / ${c.pgbouncer} / ${c.database} |`;
      }),
    )
    .join('\n'),
);
handler.stop(true);
await sql.end();
await bouncer.stop();
await db.drop();
