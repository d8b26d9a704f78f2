import { afterAll, beforeAll, expect, test } from 'bun:test';
import { createAgent } from '../src/domain/agents/agents';
import { BY_CLI } from '../src/domain/people/audit';
import { call, startService, type Service } from '../test-faults/support/service';
import { testDatabase, type TestDatabase } from './support/database';
import { eventually } from './support/receiver';

// Two server processes on one database, as two replicas run: a key the agent rotates through one
// answers at once through the other, and the key it revoked through one is refused by the other
// as soon as the database's notice arrives, though that one had it cached, and the event stream
// and the wait held open with it there end.
let db: TestDatabase;
let a: Service;
let b: Service;
const env = () => ({ DATABASE_URL: db.url, DB_POOL_SIZE: '4', WEBHOOK_CONCURRENCY: '2' });
beforeAll(async () => {
  db = await testDatabase();
  [a, b] = await Promise.all([startService(env()), startService(env())]);
}, 60_000);
afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await db?.drop();
});

test('a rotated key works at once on both instances; the revoked one is refused on both, and what it held open on the other ends', async () => {
  const { apiKey: old } = await createAgent(db.sql, BY_CLI, { username: 'rotating' }, { allowLocal: true });
  // Both instances have the old key cached.
  for (const s of [a, b]) expect((await call(s.base, 'GET', '/api/threads', { key: old })).status).toBe(200);

  const made = await call(a.base, 'POST', '/api/agents/me/keys', { key: old, body: { name: 'rotated' } });
  expect(made.status).toBe(201);
  const fresh = made.body.data.apiKey as string;
  for (const s of [b, a]) expect((await call(s.base, 'GET', '/api/threads', { key: fresh })).status).toBe(200);

  // On the other instance: an event stream and a held wait, both with the old key.
  const stream = await fetch(`${b.base}/api/events`, { headers: { authorization: `Bearer ${old}` } });
  expect(stream.status).toBe(200);
  const streamEnded = stream.body!.pipeTo(new WritableStream()).then(
    () => Date.now(),
    () => Date.now(),
  );
  const waited = call(b.base, 'GET', '/api/deliveries?wait=30', { key: old, timeoutMs: 40_000 }).then((answer) => ({ ...answer, at: Date.now() }));
  await Bun.sleep(200);

  const listed = await call(a.base, 'GET', '/api/agents/me/keys', { key: fresh });
  const oldId = listed.body.data.find((k: { name: string }) => k.name === 'initial').id;
  const revokedAt = Date.now();
  const revoked = await call(a.base, 'DELETE', `/api/agents/me/keys/${oldId}`, { key: fresh });
  expect(revoked.status).toBe(200);

  // The instance that revoked it refuses it with its next answer; the other once the notice is heard.
  const refused = await call(a.base, 'GET', '/api/threads', { key: old });
  expect([refused.status, refused.body]).toEqual([401, { success: false, error: 'The API key is not recognised or its agent is archived.' }]);
  const refusedThere = await eventually(async () => {
    const answer = await call(b.base, 'GET', '/api/threads', { key: old });
    return answer.status === 401 ? { ...answer, at: Date.now() } : null;
  }, 2000);
  expect(refusedThere.body).toEqual({ success: false, error: 'The API key is not recognised or its agent is archived.' });
  expect(refusedThere.at - revokedAt).toBeLessThan(1000);

  const wait = await waited;
  expect([wait.status, wait.body]).toEqual([401, { success: false, error: 'The API key is not recognised or its agent is archived.' }]);
  expect(wait.at - revokedAt).toBeLessThan(2000);
  expect((await streamEnded) - revokedAt).toBeLessThan(2000);

  for (const s of [a, b]) expect((await call(s.base, 'GET', '/api/threads', { key: fresh })).status).toBe(200);
}, 30_000);
