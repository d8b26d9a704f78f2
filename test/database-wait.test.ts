import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { startEmbedded, type EmbeddedDatabase } from '../src/db/embedded';
import { silentLogger } from '../src/log';
import { testServer } from './support/database';
import { freePort } from './support/ports';

// Test files share one PostgreSQL server with other runs; when it has no connection slot left, a
// file waits for one instead of failing. Shown on a PostgreSQL of this test's own with a handful of
// slots, so that taking all of them starves nobody else.
const dataDir = mkdtempSync(join(tmpdir(), 'ams-slots-'));
const SLOTS = 8;
let pg: EmbeddedDatabase;
let port: number;
let server: ReturnType<typeof testServer>;
const held: postgres.Sql[] = [];

beforeAll(async () => {
  port = await freePort();
  // max_connections is read at start: set it, then start again.
  pg = await startEmbedded(dataDir, port, silentLogger);
  const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
  await admin.unsafe(`alter system set max_connections = ${SLOTS}`);
  await admin.end();
  await pg.stop();
  pg = await startEmbedded(dataDir, port, silentLogger);
  server = testServer(new URL(pg.url));
  await server.createTemplate();
}, 90_000);

afterAll(async () => {
  await releaseAll();
  await server?.dropTemplate();
  await pg?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

// Opens connections until PostgreSQL refuses one; returns its refusal.
async function takeEverySlot(): Promise<{ code: string; message: string }> {
  for (;;) {
    const client = postgres(pg.url, { max: 1, onnotice: () => {} });
    try {
      await client`select 1`;
      held.push(client);
    } catch (error) {
      await client.end({ timeout: 0 });
      return error as { code: string; message: string };
    }
  }
}

async function releaseAll() {
  await Promise.all(held.splice(0).map((client) => client.end({ timeout: 0 })));
}

async function until(condition: () => boolean, ms = 10_000) {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await Bun.sleep(10);
  }
}

test('with every slot taken, a test database waits for one and is made once a slot frees', async () => {
  expect(await takeEverySlot()).toMatchObject({ code: '53300', message: 'sorry, too many clients already' });
  const refusals: string[] = [];
  const made = server.database({ onRefused: (error) => refusals.push(error.message) });
  // Refused, and still waiting: not failed.
  const waiting = await Promise.race([made.then(() => 'made', () => 'failed'), until(() => refusals.length >= 2).then(() => 'waiting')]);
  expect(waiting).toBe('waiting');
  await releaseAll();
  const db = await made;
  try {
    const [row] = await db.sql`select count(*)::int as n from schema_migrations`;
    expect(row!.n).toBeGreaterThan(0);
    expect(refusals.every((m) => m === 'sorry, too many clients already')).toBe(true);
  } finally {
    await db.drop();
  }
});

test('the wait is bounded: when no slot comes, it fails saying why', async () => {
  await takeEverySlot();
  try {
    await expect(server.database({ waitMs: 1_000 })).rejects.toThrow('PostgreSQL had no free connection for 1 s: sorry, too many clients already');
  } finally {
    await releaseAll();
  }
});
