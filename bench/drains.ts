// `bun bench/drains.ts` (or `BENCH_ONLY=drains bun run bench`): is a drain as cheap the tenth time
// as the first? The service on a fresh database drains a backlog of DRAIN_SIZE doorbells (default
// 4 000) to a local receiver, DRAINS times (default 10) on the same database, and prints per drain
// the doorbells/s, the CPU per doorbell of the service and of this bench's own PostgreSQL (its
// postmaster and children only), and the size and dead row versions of every table a doorbell
// touches, so that whatever grows from drain to drain shows. DRAINS_REPORT=1 has the receiver
// report each doorbell delivered, as a handler would.
import { openSync } from 'node:fs';
import { connect, type Sql } from '../src/db/connect';
import { asActor } from '../src/domain/agents/actors';
import { createAgent } from '../src/domain/agents/agents';
import { postMessage } from '../src/domain/messages/messages';
import { openThread } from '../src/domain/threads/threads';
import { createLogger } from '../src/log';
import { databaseCpuMs, postmasterPid, processCpuMs } from './cpu';
import { freshDatabases } from './fresh-database';
import { round } from './stats';
import { BY_CLI } from '../src/domain/people/audit';
import { listeningPort } from './instance';

const drains = Number(process.env.DRAINS ?? 10);
const drainSize = Number(process.env.DRAIN_SIZE ?? 4000);
const reportDelivered = process.env.DRAINS_REPORT === '1';
const recipients = 10;
const root = new URL('..', import.meta.url).pathname;
const progress = (line: string) => process.stderr.write(`${line}\n`);

// ---- what a doorbell touches, and how big it has grown ----
const TABLES = [
  'public.deliveries',
  'public.delivery_attempts',
  'public.messages',
  'public.endpoint_health',
  'public.endpoint_attempt_windows',
  'public.agents',
  'graphile_worker._private_jobs',
  'graphile_worker._private_job_queues',
];

type TableFigures = { table: string; live: number; dead: number; updates: number; hot: number; kb: number; vacuums: number; analyzes: number };

async function tableFigures(sql: Sql): Promise<TableFigures[]> {
  return sql<TableFigures[]>`
    select s.schemaname || '.' || s.relname as table, s.n_live_tup::int as live, s.n_dead_tup::int as dead,
           s.n_tup_upd::int as updates, s.n_tup_hot_upd::int as hot,
           (pg_total_relation_size(s.relid) / 1024)::int as kb,
           (s.vacuum_count + s.autovacuum_count)::int as vacuums, (s.analyze_count + s.autoanalyze_count)::int as analyzes
    from pg_stat_user_tables s
    where s.schemaname || '.' || s.relname = any(${TABLES}::text[])
    order by array_position(${TABLES}::text[], s.schemaname || '.' || s.relname)`;
}

// The statements that took PostgreSQL longest in the last drain, when pg_stat_statements is
// preloaded (DRAINS_STATEMENTS=1; the embedded server does not preload it).
const statements = process.env.DRAINS_STATEMENTS === '1';

async function resetStatements(sql: Sql) {
  await sql`create extension if not exists pg_stat_statements`;
  await sql`select pg_stat_statements_reset()`;
}

async function topStatements(sql: Sql) {
  return sql<{ calls: number; totalMs: number; meanUs: number; blocks: number; query: string }[]>`
    select calls::int, round(total_exec_time)::int as "totalMs", round(mean_exec_time * 1000)::int as "meanUs",
           (shared_blks_hit + shared_blks_read)::int as blocks, left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 110) as query
    from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())
    order by total_exec_time desc limit 8`;
}

// ---- the service, its receiver, its backlog ----

function startService(databaseUrl: string) {
  return Bun.spawn(['bun', 'bench/server.ts'], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: databaseUrl, HOST: '127.0.0.1', WEBHOOK_ALLOW_LOCAL: 'true', LOG_LEVEL: 'info', PORT: '0' },
    stdout: 'pipe',
    // The service logs a line per doorbell, as in production; kept in a file nobody reads.
    stderr: openSync(`${root}bench/drains-server.log`, 'w'),
  });
}

type Doorbell = { deliveryId: string };

function startReceiver(arrived: () => Map<string, number>, report: (deliveryId: string) => void) {
  return Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      const at = performance.now();
      const { data } = (await req.json()) as { data: Doorbell };
      arrived().set(data.deliveryId, at);
      report(data.deliveryId);
      return new Response(null, { status: 204 });
    },
  });
}

async function untilAll(map: Map<string, number>, size: number) {
  const deadline = performance.now() + 120_000;
  while (map.size < size) {
    if (performance.now() > deadline) throw new Error(`only ${map.size} of ${size} doorbells arrived`);
    await Bun.sleep(5);
  }
}

// ---- the run ----
const db = await freshDatabases();
const sql = connect(db.url, 4);
const log = createLogger('warn');
const service = startService(db.url);
try {
  const base = `http://127.0.0.1:${(await listeningPort(service.stdout, 'the service exited before it was ready; see bench/drains-server.log')).port}`;
  let arrived = new Map<string, number>();
  const keys = new Map<string, string>();
  const reports: Promise<unknown>[] = [];
  const receiver = startReceiver(
    () => arrived,
    (deliveryId) => {
      if (!reportDelivered) return;
      const report = fetch(`${base}/api/deliveries/${deliveryId}/delivered`, {
        method: 'POST',
        headers: { authorization: `Bearer ${keys.get(deliveryId)}` },
      }).then((res) => {
        if (!res.ok) throw new Error(`delivered report for ${deliveryId}: ${res.status}`);
      });
      reports.push(report);
    },
  );
  const agent = async (username: string, webhookUrl?: string) => {
    const created = await createAgent(sql, BY_CLI, { username, webhookUrl }, { allowLocal: true });
    // The sender posts far past the default quota: counted, never refused.
    const [row] = await sql<{ id: string }[]>`update agents set messages_per_minute = 100000000 where username = ${username} returning id`;
    return { key: created.apiKey, actor: asActor({ id: row!.id, username }) };
  };
  const sender = await agent('sender');
  // A webhook URL each, as the throughput scenario of bench/load.ts gives them (docs/internals/performance-history.md).
  const hooks = await Promise.all(
    Array.from({ length: recipients }, (_, i) => agent(`hook${i + 1}`, `http://127.0.0.1:${receiver.port}/hook/${i + 1}`)),
  );
  const keyOf = new Map(hooks.map((h) => [h.actor.id, h.key]));
  const { id: threadId } = await openThread(sql, sender.actor, { title: 'drains', participantUsernames: hooks.map((h) => h.actor.username) });
  // The scenario is about PostgreSQL's CPU: it needs its server on this machine.
  const postmaster = await postmasterPid(db.url);
  if (postmaster === null) throw new Error('bench/drains.ts counts its PostgreSQL\'s CPU: it needs a server running on this machine.');

  const drain = async (n: number) => {
    arrived = new Map();
    if (statements) await resetStatements(sql);
    await sql.begin(async (tx) => {
      for (let i = 0; i < drainSize / recipients; i++) {
        await postMessage(tx as unknown as Sql, log, sender.actor, threadId, { content: `drain ${n} message ${i}` });
      }
      // Known before the commit, so before the first doorbell can arrive and be reported.
      const owed = await tx<{ id: string; recipient: string }[]>`
        select d.id, d.recipient_id as recipient from deliveries d join messages m on m.id = d.message_id
        where m.content like ${`drain ${n} message %`}`;
      for (const d of owed) keys.set(d.id, keyOf.get(d.recipient)!);
    });
    const committed = performance.now();
    const database = databaseCpuMs(postmaster);
    const server = processCpuMs(service.pid);
    await untilAll(arrived, drainSize);
    await Promise.all(reports.splice(0));
    const elapsed = Math.max(...arrived.values()) - committed;
    const us = (ms: number) => Math.round((ms * 1000) / drainSize);
    const figures = {
      perSecond: round((drainSize / elapsed) * 1000, 0),
      databaseUs: us(databaseCpuMs(postmaster) - database),
      serviceUs: us(processCpuMs(service.pid) - server),
    };
    // The statistics collector reports a moment later; what the drain left behind, not what is
    // still in flight.
    await Bun.sleep(1000);
    return { ...figures, tables: await tableFigures(sql), statements: statements ? await topStatements(sql) : [] };
  };

  // Unmeasured: the first drain would otherwise pay for opening connections and preparing statements.
  await drain(0);
  progress(`${drains} drains of ${drainSize} doorbells after a warm-up drain${reportDelivered ? ', each reported delivered' : ''}`);
  const results = [];
  for (let n = 1; n <= drains; n++) {
    const r = await drain(n);
    results.push(r);
    progress(`drain ${n}: ${r.perSecond}/s, PostgreSQL ${r.databaseUs} µs and service ${r.serviceUs} µs per doorbell`);
    for (const t of r.tables) {
      progress(`  ${t.table.padEnd(36)} live ${String(t.live).padStart(7)} dead ${String(t.dead).padStart(7)} upd ${String(t.updates).padStart(7)} hot ${String(t.hot).padStart(7)} ${String(t.kb).padStart(7)} kB vacuums ${t.vacuums} analyzes ${t.analyzes}`);
    }
    for (const q of r.statements) {
      progress(`  ${String(q.calls).padStart(6)} calls ${String(q.totalMs).padStart(6)} ms ${String(q.meanUs).padStart(6)} µs ${String(q.blocks).padStart(8)} blocks  ${q.query}`);
    }
  }
  const first = results[0]!;
  const last = results.at(-1)!;
  const ratio = (a: number, b: number) => round(a / b, 2);
  console.log(JSON.stringify({
    drains,
    drainSize,
    reportDelivered,
    perSecond: results.map((r) => r.perSecond),
    databaseUs: results.map((r) => r.databaseUs),
    serviceUs: results.map((r) => r.serviceUs),
    lastOverFirst: { perSecond: ratio(last.perSecond, first.perSecond), databaseUs: ratio(last.databaseUs, first.databaseUs) },
  }));
  receiver.stop(true);
} finally {
  service.kill('SIGTERM');
  await service.exited;
  await sql.end();
  await db.drop();
}
