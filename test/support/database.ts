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

export async function testDatabase(): Promise<TestDatabase> {
  if (!serverUrl) throw new Error('The test preload did not start a database server.');
  const name = `ams_test_${randomBytes(6).toString('hex')}`;
  const admin = postgres(withDatabase(serverUrl, 'postgres'), { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name} template ${TEMPLATE}`);
  const url = withDatabase(serverUrl, name);
  const sql = connect(url, 10);
  return {
    sql,
    url,
    drop: async () => {
      await sql.end({ timeout: 1 });
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}
