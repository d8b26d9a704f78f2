import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { connect } from '../src/db/connect';
import { startEmbedded } from '../src/db/embedded';
import { migrate } from '../src/db/migrate';
import { silentLogger } from '../src/log';

export type BenchDatabases = {
  // The service's database, migrated.
  url: string;
  // An empty database for the raw graphile-worker baselines, so that their jobs and the service's
  // worker never see each other's queue.
  baselineUrl: string;
  drop: () => Promise<void>;
};

const withName = (url: string, name: string) => {
  const next = new URL(url);
  next.pathname = `/${name}`;
  return next.toString();
};

// The service's pools and, beside them, the baselines' (each queue's as large as the service's
// worker's) outgrow PostgreSQL's default of 100 connections.
const MAX_CONNECTIONS = 200;

// The setting takes effect at the server's next start.
async function raiseMaxConnections(url: string) {
  const admin = postgres(withName(url, 'postgres'), { max: 1, onnotice: () => {} });
  await admin.unsafe(`alter system set max_connections = ${MAX_CONNECTIONS}`);
  await admin.end();
}

// Two new databases on the PostgreSQL in DATABASE_URL, or on an embedded server in a temporary
// folder when it is unset; dropped (or the folder removed) afterwards.
export async function freshDatabases(): Promise<BenchDatabases> {
  let server = process.env.DATABASE_URL;
  let stopEmbedded = async () => {};
  if (!server) {
    const dir = mkdtempSync(join(tmpdir(), 'ams-bench-'));
    // Below Linux's ephemeral range (32768 up), which the many-waiters scenario's ten thousand
    // connections, lingering in TIME_WAIT, may have taken from a previous run.
    const port = 30000 + Math.floor(Math.random() * 2500);
    let embedded = await startEmbedded(dir, port, silentLogger);
    await raiseMaxConnections(embedded.url);
    await embedded.stop();
    embedded = await startEmbedded(dir, port, silentLogger);
    server = embedded.url;
    stopEmbedded = async () => {
      await embedded.stop();
      rmSync(dir, { recursive: true, force: true });
    };
  }
  const name = `ams_bench_${randomBytes(4).toString('hex')}`;
  const admin = postgres(withName(server, 'postgres'), { max: 1, onnotice: () => {} });
  const [limit] = await admin<{ max: number }[]>`select current_setting('max_connections')::int as max`;
  if (limit!.max < MAX_CONNECTIONS) {
    process.stderr.write(`max_connections is ${limit!.max} on DATABASE_URL's server; the bench may need up to ${MAX_CONNECTIONS}\n`);
  }
  await admin.unsafe(`create database ${name}`);
  await admin.unsafe(`create database ${name}_baseline`);
  const url = withName(server, name);
  const sql = connect(url, 1);
  await migrate(sql, url);
  await sql.end();
  return {
    url,
    baselineUrl: withName(server, `${name}_baseline`),
    drop: async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.unsafe(`drop database if exists ${name}_baseline with (force)`);
      await admin.end();
      await stopEmbedded();
    },
  };
}
