import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { connect, type Sql } from '../../src/db/connect';
import { startEmbedded, type EmbeddedDatabase } from '../../src/db/embedded';
import { migrate } from '../../src/db/migrate';
import { silentLogger } from '../../src/log';

// Tests run against a real PostgreSQL: DATABASE_URL when set, otherwise an embedded server kept
// under .test-data. Migrations run once into a template database; each test file gets its own
// clone of it, which takes milliseconds and keeps files from seeing each other's rows.
// Per process, so that test runs from several checkouts can share one server.
const TEMPLATE = `ams_test_template_${process.pid}`;
let embedded: EmbeddedDatabase | null = null;
let serverUrl: URL | null = null;

function withDatabase(url: URL, name: string): string {
  const next = new URL(url);
  next.pathname = `/${name}`;
  return next.toString();
}

export async function startTestServer(): Promise<void> {
  if (process.env.DATABASE_URL) serverUrl = new URL(process.env.DATABASE_URL);
  else {
    embedded = await startEmbedded('.test-data', Number(process.env.TEST_PG_PORT ?? 54339), silentLogger);
    serverUrl = new URL(embedded.url);
  }
  const admin = postgres(withDatabase(serverUrl, 'postgres'), { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists ${TEMPLATE} with (force)`);
  await admin.unsafe(`create database ${TEMPLATE}`);
  await admin.end();
  const url = withDatabase(serverUrl, TEMPLATE);
  const sql = connect(url, 1);
  await migrate(sql, url);
  await sql.end();
}

export async function stopTestServer(): Promise<void> {
  if (serverUrl) {
    const admin = postgres(withDatabase(serverUrl, 'postgres'), { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop database if exists ${TEMPLATE} with (force)`);
    await admin.end();
  }
  await embedded?.stop();
}

export type TestDatabase = { sql: Sql; url: string; drop: () => Promise<void> };

// A fresh clone with a pool of its own, for tests that run the service in other processes.
export async function testDatabase(): Promise<TestDatabase> {
  const { url, drop } = await createTestDatabase();
  const sql = connect(url, 10);
  return {
    sql,
    url,
    drop: async () => {
      await sql.end({ timeout: 1 });
      await drop();
    },
  };
}

// A fresh clone of the template. The caller connects to it: the harness through its service, so
// that the tests' own queries share the service's pool as they would share a server's.
export async function createTestDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (!serverUrl) throw new Error('The test preload did not start a database server.');
  const name = `ams_test_${randomBytes(6).toString('hex')}`;
  const admin = postgres(withDatabase(serverUrl, 'postgres'), { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name} template ${TEMPLATE}`);
  return {
    url: withDatabase(serverUrl, name),
    drop: async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}

// Wake-ups (domain/announce.ts) that the database refuses, for tests of how a failed one is
// reported: a pg_notify of our own in public refuses the inbox and delivery channels and passes
// every other on. Only connections whose search_path puts public before pg_catalog find it first:
// those opened with `publicFirst(url)`.
export const refuseWakeUps = (sql: Sql) =>
  sql.unsafe(`
    create function public.pg_notify(channel text, payload text) returns void language plpgsql as $$
    begin
      if channel in ('ams_inbox', 'ams_delivery') then raise exception 'wake-ups refused'; end if;
      perform pg_catalog.pg_notify(channel, payload);
    end $$`);

export const publicFirst = (url: string) => `${url}?search_path=public,pg_catalog`;
