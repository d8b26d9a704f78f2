// `bun bench/scale-out.ts`: 1, 2 and 3 instances of the service (`bench/server.ts`, each with its
// inline worker) on one fresh PostgreSQL, posts spread over them round-robin by 64 concurrent
// clients for 10 s, every post ringing a doorbell at a local handler. Reports posts and doorbells
// per second, connections held, and CPU per post for the instances together, PostgreSQL and this
// load process, each as measured in the same run. Writes bench/scale-out.json.
import { connect } from '../src/db/connect';
import { createAgent } from '../src/domain/agents/agents';
import { cpuPerRequest, cpuSnapshot, postmasterPid, type CpuSnapshot } from './cpu';
import { freshDatabases } from './fresh-database';
import { startInstance } from './instance';
import { BY_CLI } from '../src/domain/people/audit';

const root = new URL('..', import.meta.url).pathname;
const SECONDS = Number(process.env.SCALE_SECONDS ?? 10);
const CLIENTS = 64;

const db = await freshDatabases();
const databasePid = await postmasterPid(db.url);
const sql = connect(db.url, 4);
let rung = 0;
const handler = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => (rung++, new Response('ok')) });


const cpuOf = (pids: number[]) => pids.map((pid) => cpuSnapshot(pid, databasePid));
function sumCpu(before: CpuSnapshot[], after: CpuSnapshot[], requests: number) {
  const each = before.map((b, i) => cpuPerRequest(b, after[i]!, requests));
  // PostgreSQL and the load process are the same in every snapshot; the instances add up.
  return { instances: each.reduce((n, e) => n + e.server, 0), database: each[0]!.database, load: each[0]!.load };
}

const results: Record<string, unknown>[] = [];
for (const count of [1, 2, 3]) {
  const instances = await Promise.all(Array.from({ length: count }, () => startInstance({ DATABASE_URL: db.url })));
  const sender = await createAgent(sql, BY_CLI, { username: `scale-sender-${count}` }, { allowLocal: true });
  const hooked = await createAgent(sql, BY_CLI, { username: `scale-hooked-${count}`, webhookUrl: `http://127.0.0.1:${handler.port}/h` }, { allowLocal: true });
  // It posts far past the default quota: counted, never refused.
  await sql`update agents set messages_per_minute = 100000000 where username = ${`scale-sender-${count}`}`;
  const headers = { authorization: `Bearer ${sender.apiKey}`, 'content-type': 'application/json' };
  const opened = await fetch(`${instances[0]!.base}/api/threads`, { method: 'POST', headers, body: JSON.stringify({ title: 'scale', participantUsernames: [hooked.username] }) });
  const threadId = ((await opened.json()) as { data: { id: string } }).data.id;
  rung = 0;
  let posted = 0;
  let turn = 0;
  const until = performance.now() + SECONDS * 1000;
  const before = cpuOf(instances.map((i) => i.pid));
  let connections = 0;
  const sampler = setInterval(async () => {
    const [row] = await sql`select count(*)::int as n from pg_stat_activity where datname = current_database()`;
    connections = Math.max(connections, row!.n);
  }, 500);
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (performance.now() < until) {
        const base = instances[turn++ % count]!.base;
        const res = await fetch(`${base}/api/threads/${threadId}/messages`, { method: 'POST', headers, body: '{"content":"scale out"}' });
        await res.arrayBuffer();
        if (res.status === 201) posted++;
      }
    }),
  );
  const after = cpuOf(instances.map((i) => i.pid));
  const postedIn = performance.now() - (until - SECONDS * 1000);
  // Doorbells still owed are given a moment to drain, then counted against the whole time taken.
  const drainStart = performance.now();
  while (rung < posted && performance.now() - drainStart < 30_000) await Bun.sleep(100);
  const rungIn = performance.now() - (until - SECONDS * 1000);
  clearInterval(sampler);
  const cpu = sumCpu(before, after, posted);
  results.push({
    instances: count,
    postsPerSecond: Math.round(posted / (postedIn / 1000)),
    doorbellsPerSecond: Math.round(rung / (rungIn / 1000)),
    peakConnections: connections,
    cpuPerPostUs: cpu,
  });
  process.stderr.write(`${JSON.stringify(results.at(-1))}\n`);
  await Promise.all(instances.map((i) => i.stop()));
}

const machine = { cores: navigator.hardwareConcurrency, postgres: (await sql`show server_version`)[0]!.server_version };
await Bun.write(`${root}bench/scale-out.json`, JSON.stringify({ machine, seconds: SECONDS, clients: CLIENTS, results }, null, 2) + '\n');
console.log(
  ['| Instances | Posts/s | Doorbells/s | Peak connections | CPU per post: instances / PostgreSQL / load (µs) |', '|---|---|---|---|---|']
    .concat(
      results.map((r) => {
        const c = r.cpuPerPostUs as { instances: number; database: number; load: number };
        return `| ${r.instances} | ${r.postsPerSecond} | ${r.doorbellsPerSecond} | ${r.peakConnections} | ${c.instances} / ${c.database} / ${c.load} |`;
      }),
    )
    .join('\n'),
);
handler.stop(true);
await sql.end();
await db.drop();
