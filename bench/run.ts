// `bun run bench`: the service on a fresh database, every scenario driven from a separate load
// process, each figure beside a baseline measured in the same run; one table on stdout and every
// run's numbers in bench/results.json. BENCH_RUNS sets the runs per scenario (default 3).
import { cpus, totalmem } from 'node:os';
import { openSync } from 'node:fs';
import postgres from 'postgres';
import { loadConfig } from '../src/config';
import { workerPoolSize } from '../src/db/worker-pool';
import { postmasterPid } from './cpu';
import { freshDatabases } from './fresh-database';
import type { LoadSetup } from './load';
import { report } from './report';
import { median, round } from './stats';
import { listeningPort } from './instance';

const runs = Number(process.env.BENCH_RUNS ?? 3);
const root = new URL('..', import.meta.url).pathname;
const started = performance.now();
const step = (line: string) => process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${line}\n`);

// The ten-drain check, the growth check, the cost of people's rules, of keys, of presence and of a
// tool call over MCP, the service behind PgBouncer, the history's growth to 10 M, and files in and
// out run alone, each on a fresh database of its own (bench/drains.ts, bench/scale.ts,
// bench/governance.ts, bench/keys.ts, bench/presence.ts, bench/mcp.ts, bench/pooler.ts,
// bench/growth.ts, bench/files.ts).
const alone: Record<string, string> = {
  drains: 'bench/drains.ts',
  scale: 'bench/scale.ts',
  governance: 'bench/governance.ts',
  keys: 'bench/keys.ts',
  presence: 'bench/presence.ts',
  mcp: 'bench/mcp.ts',
  pooler: 'bench/pooler.ts',
  growth: 'bench/growth.ts',
  files: 'bench/files.ts',
};
if (process.env.BENCH_ONLY && alone[process.env.BENCH_ONLY]) {
  process.exit(Bun.spawnSync(['bun', alone[process.env.BENCH_ONLY]!], { cwd: root, stdout: 'inherit', stderr: 'inherit' }).exitCode);
}

step('fresh database');
const db = await freshDatabases();
const serviceEnv = {
  ...process.env,
  DATABASE_URL: db.url,
  HOST: '127.0.0.1',
  WEBHOOK_ALLOW_LOCAL: 'true',
  LOG_LEVEL: 'info',
  // The many-waiters scenario counts held requests on /metrics.
  METRICS_TOKEN: 'bench-metrics-token',
  // Its "10 000 waits of one agent" and the event streams' scenarios hold far more requests per
  // agent than a deployment allows by default: the bench measures what they cost, not the bound.
  HELD_REQUESTS_PER_AGENT: '20000',
  // Its senders post thousands a second: every post is counted against a quota, as by default,
  // but one no scenario reaches (bench/governance.ts measures what the rules cost).
  SEND_MESSAGES_PER_MINUTE: '100000000',
};
// The baselines run as the service's worker does: as many jobs at once, on a pool as large.
const serviceConfig = loadConfig(serviceEnv);
const worker = { concurrency: serviceConfig.WEBHOOK_CONCURRENCY, poolSize: workerPoolSize(serviceConfig), queryPoolSize: serviceConfig.DB_POOL_SIZE };

try {
  const machine = await describeMachine(db.url);
  const databasePid = await postmasterPid(db.url);
  if (databasePid === null) step('PostgreSQL is not a process on this machine: its CPU is not counted');
  step('service');
  // BENCH_PROFILE=1: the service writes a CPU profile (Chrome format and markdown) to bench/profile/.
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-md', '--cpu-prof-dir=bench/profile'] : [];
  const server = Bun.spawn(['bun', ...profile, 'bench/server.ts'], {
    cwd: root,
    env: { ...serviceEnv, PORT: '0' },
    stdout: 'pipe',
    // The service logs a line per doorbell, as in production; kept in a file nobody reads.
    stderr: openSync(`${root}bench/server.log`, 'w'),
  });
  const { port } = await listeningPort(server.stdout, 'the service exited before it was ready; see bench/server.log');
  step(`load (${runs} runs per scenario)`);
  const setup: LoadSetup = {
    base: `http://127.0.0.1:${port}`,
    databaseUrl: db.url,
    baselineUrl: db.baselineUrl,
    serverPid: server.pid,
    databasePid,
    runs,
    concurrency: 64,
    worker,
    metricsToken: serviceEnv.METRICS_TOKEN,
  };
  const load = Bun.spawn(['bun', 'bench/load.ts'], {
    cwd: root,
    env: { ...process.env, BENCH_SETUP: JSON.stringify(setup) },
    stdout: 'pipe',
    stderr: 'inherit',
  });
  const loadOutput = await new Response(load.stdout).text();
  if ((await load.exited) !== 0) throw new Error('the load process failed');
  const measured = JSON.parse(loadOutput.trim().split('\n').at(-1)!);
  server.kill('SIGTERM');
  await server.exited;

  const start = process.env.BENCH_ONLY && !process.env.BENCH_ONLY.includes('start') ? null : await startTimes();
  const results = { machine, runs, worker, ...measured, start, totalSeconds: round((performance.now() - started) / 1000, 0) };
  await Bun.write(`${root}bench/results.json`, JSON.stringify(results, null, 2) + '\n');
  console.log(report(results));
  step('done; every run is in bench/results.json');
} finally {
  await db.drop();
}

// The compiled executable, from spawn to the first 200 from /health, against the migrated database.
async function startTimes() {
  step('compiled binary: bun run build');
  const build = Bun.spawnSync(['bun', 'run', 'build'], { cwd: root, stdout: 'ignore', stderr: 'inherit' });
  if (build.exitCode !== 0) throw new Error('bun run build failed');
  const readyMs: number[] = [];
  const idleRssMb: number[] = [];
  for (let i = 0; i < Math.max(3, runs); i++) {
    const port = 20000 + Math.floor(Math.random() * 10000);
    const t = performance.now();
    const child = Bun.spawn([`${root}dist/ams`], {
      env: { ...serviceEnv, PORT: String(port), LOG_LEVEL: 'warn' },
      stdout: 'ignore',
      stderr: 'ignore',
    });
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.status === 200, () => false);
      if (ok) break;
      if (performance.now() - t > 30_000) throw new Error('dist/ams did not answer /health within 30 s');
      await Bun.sleep(2);
    }
    readyMs.push(performance.now() - t);
    await Bun.sleep(500);
    idleRssMb.push(Number(/VmRSS:\s+(\d+)/.exec(await Bun.file(`/proc/${child.pid}/status`).text())![1]) / 1024);
    child.kill('SIGTERM');
    await child.exited;
  }
  step(`ready in ${readyMs.map((m) => m.toFixed(0)).join(', ')} ms`);
  return { readyMs: readyMs.map((m) => round(m, 0)), medianReadyMs: round(median(readyMs), 0), idleRssMb: round(median(idleRssMb), 1) };
}

async function describeMachine(url: string) {
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  const [row] = await admin<{ version: string }[]>`select current_setting('server_version') as version`;
  const version = row!.version;
  await admin.end();
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGb: round(totalmem() / 1024 ** 3, 1),
    postgres: version as string,
    postgresWhere: process.env.DATABASE_URL ? 'DATABASE_URL (same machine)' : 'embedded',
    bun: Bun.version,
  };
}
