import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { connect, type Sql } from '../../src/db/connect';
import { startEmbedded, type EmbeddedDatabase } from '../../src/db/embedded';
import { migrate } from '../../src/db/migrate';
import { silentLogger } from '../../src/log';

// Tests run against a real PostgreSQL: DATABASE_URL when set, otherwise an embedded server kept
// under .test-data. Migrations run once into a template database; each test file gets its own
// clone of it, which takes milliseconds and keeps files from seeing each other's rows.

// Bun's 5 s default is too tight for hooks that create and drop databases on a loaded machine
// (test/support/setup.ts); the fault suite asks for more.
export const TEST_TIMEOUT_MS = Number(process.env.TEST_TIMEOUT_MS ?? 30_000);

// PostgreSQL refuses a connection with too_many_connections when every slot is taken ("sorry, too
// many clients already", or the last ones are kept for superusers). The server may be shared with
// other test runs, whose fault suites take a hundred connections at a time, so a test file waits
// for a slot instead of failing: up to a minute, but within the time-out of the hook that asked,
// so that the error ending the wait is this one, saying why.
const TOO_MANY_CONNECTIONS = '53300';
const SLOT_WAIT_MS = Math.min(60_000, TEST_TIMEOUT_MS - 5_000);
const SLOT_RETRY_MS = 250;

export type SlotWait = { waitMs?: number; onRefused?: (error: Error) => void };

export async function withConnectionSlot<T>(attempt: () => Promise<T>, { waitMs = SLOT_WAIT_MS, onRefused }: SlotWait = {}): Promise<T> {
  const deadline = performance.now() + waitMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if ((error as { code?: unknown }).code !== TOO_MANY_CONNECTIONS) throw error;
      onRefused?.(error as Error);
      const remaining = deadline - performance.now();
      if (remaining <= 0) {
        throw new Error(`PostgreSQL had no free connection for ${waitMs / 1000} s: ${(error as Error).message}`, { cause: error });
      }
      await Bun.sleep(Math.min(SLOT_RETRY_MS, remaining));
    }
  }
}

function withDatabase(url: URL, name: string): string {
  const next = new URL(url);
  next.pathname = `/${name}`;
  return next.toString();
}

// One connection to the server's maintenance database, made before it is handed out.
async function adminClient(server: URL, wait: SlotWait): Promise<postgres.Sql> {
  return withConnectionSlot(async () => {
    const admin = postgres(withDatabase(server, 'postgres'), { max: 1, onnotice: () => {} });
    try {
      await admin`select 1`;
      return admin;
    } catch (error) {
      await admin.end({ timeout: 0 });
      throw error;
    }
  }, wait);
}

export type TestDatabase = { sql: Sql; url: string; drop: () => Promise<void> };

// The template and the per-file clones on one PostgreSQL server.
export function testServer(server: URL) {
  // Per process, so that test runs from several checkouts can share one server.
  const template = `ams_test_template_${process.pid}`;
  return {
    async createTemplate(wait: SlotWait = {}): Promise<void> {
      const admin = await adminClient(server, wait);
      await admin.unsafe(`drop database if exists ${template} with (force)`);
      await admin.unsafe(`create database ${template}`);
      await admin.end();
      const url = withDatabase(server, template);
      const sql = connect(url, 1);
      await withConnectionSlot(() => sql`select 1`, wait);
      await migrate(sql, url);
      await sql.end();
    },

    async dropTemplate(wait: SlotWait = {}): Promise<void> {
      const admin = await adminClient(server, wait);
      await admin.unsafe(`drop database if exists ${template} with (force)`);
      await admin.end();
    },

    async clone(wait: SlotWait = {}): Promise<{ url: string; drop: () => Promise<void> }> {
      const name = `ams_test_${randomBytes(6).toString('hex')}`;
      const admin = await adminClient(server, wait);
      await admin.unsafe(`create database ${name} template ${template}`);
      return {
        url: withDatabase(server, name),
        drop: async () => {
          await admin.unsafe(`drop database if exists ${name} with (force)`);
          await admin.end();
        },
      };
    },

    async database(wait: SlotWait = {}): Promise<TestDatabase> {
      const { url, drop } = await this.clone(wait);
      const sql = connect(url, 10);
      await withConnectionSlot(() => sql`select 1`, wait);
      return {
        sql,
        url,
        drop: async () => {
          await sql.end({ timeout: 1 });
          await drop();
        },
      };
    },
  };
}

let embedded: EmbeddedDatabase | null = null;
let shared: ReturnType<typeof testServer> | null = null;

export async function startTestServer(): Promise<void> {
  let url: URL;
  if (process.env.DATABASE_URL) url = new URL(process.env.DATABASE_URL);
  else {
    embedded = await startEmbedded(process.env.TEST_PG_DIR ?? '.test-data', Number(process.env.TEST_PG_PORT ?? 54339), silentLogger);
    url = new URL(embedded.url);
  }
  shared = testServer(url);
  await shared.createTemplate();
}

export async function stopTestServer(): Promise<void> {
  await shared?.dropTemplate();
  await embedded?.stop();
}

// A fresh clone with a pool of its own, for tests that run the service in other processes.
export async function testDatabase(): Promise<TestDatabase> {
  if (!shared) throw new Error('The test preload did not start a database server.');
  return shared.database();
}

// A fresh clone of the template. The caller connects to it: the harness through its service, so
// that the tests' own queries share the service's pool as they would share a server's.
export async function createTestDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (!shared) throw new Error('The test preload did not start a database server.');
  return shared.clone();
}

// Wake-ups (domain/deliveries/delivery-wake-ups.ts) that the database refuses, for tests of how a failed one is
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
