import { afterAll, beforeAll, expect, test } from 'bun:test';
import postgres from 'postgres';
import { loadConfig } from '../src/config';
import { createLogger } from '../src/log';
import { createService, type HttpService } from '../src/service';
import { STATEMENT_TOO_LONG } from '../src/web/failure';
import { createTestDatabase } from './support/database';
import { callApp, useListening, useHarness, uniqueName, type TestAgent } from './support/harness';
import { mcpClient } from './support/mcp-client';

// Every statement of the service's pool is bounded in time by PostgreSQL itself
// (STATEMENT_TIMEOUT_MS): whatever a caller's input makes it cost, a request's statement stops, and
// the request is answered 503 in the envelope, changing nothing. Migrations are not bounded.
const TIMEOUT_MS = 300;
const h = useHarness({ STATEMENT_TIMEOUT_MS: String(TIMEOUT_MS) });
const at = useListening(h);
let admin: postgres.Sql;
let alice: TestAgent;
let bob: TestAgent;

beforeAll(async () => {
  admin = postgres(h.db.url, { max: 2, onnotice: () => {} });
  alice = await h.agent(uniqueName('alice'));
  bob = await h.agent(uniqueName('bob'));
  await h.thread(alice, [bob], 'Held');
});
afterAll(() => admin.end());

async function holding<T>(table: string, run: () => Promise<T>): Promise<T> {
  const lock = await admin.reserve();
  try {
    await lock`begin`;
    await lock.unsafe(`lock table ${table} in access exclusive mode`);
    return await run();
  } finally {
    await lock`rollback`;
    lock.release();
  }
}

test('a request whose statement runs past STATEMENT_TIMEOUT_MS is 503 with Retry-After, over HTTP and MCP, and writes nothing', async () => {
  await holding('threads', async () => {
    const listed = await h.call('GET', '/api/threads', { key: alice.key });
    expect([listed.status, listed.headers.get('retry-after'), listed.body]).toEqual([503, '1', { success: false, error: STATEMENT_TOO_LONG }]);
    const opened = await h.call('POST', '/api/threads', { key: alice.key, body: { title: 'Never', participantUsernames: [bob.username] } });
    expect([opened.status, opened.body]).toEqual([503, { success: false, error: STATEMENT_TOO_LONG }]);
    const mcp = await mcpClient(at.base, alice.key);
    try {
      expect(await mcp.call('list_threads')).toEqual({ error: STATEMENT_TOO_LONG });
    } finally {
      await mcp.close();
    }
  });
  const [never] = await admin`select count(*)::int as n from threads where title = 'Never'`;
  expect(never!.n).toBe(0);
  expect((await h.call('GET', '/api/threads', { key: alice.key })).status).toBe(200);
});

test('a statement stopped at the bound is logged as a warning, not a fault', async () => {
  const lines: Record<string, any>[] = [];
  const log = createLogger('debug', (line) => lines.push(JSON.parse(line)));
  const service = await createService(loadConfig({ DATABASE_URL: h.db.url, STATEMENT_TIMEOUT_MS: String(TIMEOUT_MS), DB_POOL_SIZE: '2' }), { log, http: true, worker: false });
  try {
    await holding('threads', async () => {
      const res = await callApp(service.app, 'GET', '/api/threads', { headers: { authorization: `Bearer ${alice.key}` } });
      expect(res.status).toBe(503);
    });
  } finally {
    await service.stop();
  }
  expect(lines.filter((l) => l.event === 'statement_timeout').map((l) => [l.level, l.path])).toEqual([['warn', '/api/threads']]);
  expect(lines.filter((l) => l.level === 'error')).toEqual([]);
});

test('migrations are not bounded: a start waits for another instance migrating past the bound, then starts', async () => {
  const database = await createTestDatabase();
  const other = postgres(database.url, { max: 1, onnotice: () => {} });
  let service: HttpService | null = null;
  try {
    const migrating = await other.reserve();
    await migrating`begin`;
    await migrating`select pg_advisory_xact_lock(hashtext('ams.migrate'))`;
    const starting = createService(loadConfig({ DATABASE_URL: database.url, STATEMENT_TIMEOUT_MS: String(TIMEOUT_MS) }), { log: createLogger('error'), http: true, worker: false });
    await Bun.sleep(TIMEOUT_MS * 3);
    await migrating`commit`;
    migrating.release();
    service = await starting;
    const [row] = await service.sql<{ n: number }[]>`select count(*)::int as n from schema_migrations`;
    expect(row!.n).toBeGreaterThan(0);
  } finally {
    await service?.stop();
    await other.end();
    await database.drop();
  }
});
