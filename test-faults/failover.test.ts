import { afterAll, beforeAll, expect, test } from 'bun:test';
import { connect, type Sql } from '../src/db/connect';
import { createAgent } from '../src/domain/agents/agents';
import { BY_CLI } from '../src/domain/people/audit';
import { pgGate } from '../test/support/pg-gate';
import { eventually, receiver } from '../test/support/receiver';
import { replicatedPair, type ReplicatedPair } from '../test/support/replicated-postgres';
import { call, startService, type Answer, type Service } from './support/service';

// The primary dies and a synchronous standby takes over, as a failover manager (Patroni,
// CloudNativePG, a managed PostgreSQL) does it: the standby is promoted and the one address the
// service knows (here a TCP gate, as a failover manager moves a service address) is moved to it.
// A post answered 201 was committed on the standby too (synchronous_standby_names), so nothing
// acknowledged is lost, and the doorbell each one owes goes out from the new primary.
let pair: ReplicatedPair;
let gate: ReturnType<typeof pgGate>;
let server: Service;
let admin: Sql | undefined;
// How long after the kill a failover manager acts: it must first be sure the primary is gone.
const DETECTION_MS = 1_000;

const arrived = new Set<string>();
const hook = receiver((req) => {
  arrived.add(JSON.parse(req.raw).data.messageId);
  return new Response('ok');
});

beforeAll(async () => {
  pair = await replicatedPair({ synchronous: true });
  gate = pgGate({ host: '127.0.0.1', port: pair.primary.port });
  gate.open();
  server = await startService({ DATABASE_URL: gate.url(pair.primary.url), DB_CONNECT_TIMEOUT_S: '2' });
}, 60_000);
afterAll(async () => {
  await server?.stop();
  await admin?.end({ timeout: 1 });
  gate?.stop();
  await pair?.stop();
});

test('a failover loses no acknowledged post and no owed doorbell: 503 while there is no primary, never 500', async () => {
  const setup = connect(pair.primary.url, 1);
  const sender = await createAgent(setup, BY_CLI, { username: 'fo-sender' }, { allowLocal: true });
  await createAgent(setup, BY_CLI, { username: 'fo-hooked', webhookUrl: hook.url() }, { allowLocal: true });
  const waiter = await createAgent(setup, BY_CLI, { username: 'fo-waiter' }, { allowLocal: true });
  await setup.end();
  const opened = await call(server.base, 'POST', '/api/threads', { key: sender.apiKey, body: { title: 'failover', participantUsernames: ['fo-hooked'] } });
  expect(opened.status).toBe(201);
  const thread = opened.body.data.id as string;

  // A burst from eight clients at once, every answer kept with the moment it came.
  const answers: (Answer & { at: number })[] = [];
  let posting = true;
  const poster = async () => {
    while (posting) {
      const answer = await call(server.base, 'POST', `/api/threads/${thread}/messages`, { key: sender.apiKey, body: { content: 'in the burst' } });
      answers.push({ ...answer, at: performance.now() });
    }
  };
  const posters = Array.from({ length: 8 }, poster);
  await eventually(async () => answers.filter((a) => a.status === 201).length >= 50, 10_000);

  const killedAt = performance.now();
  await pair.primary.kill9();
  await Bun.sleep(DETECTION_MS);
  await pair.standby.promote();
  gate.point({ host: '127.0.0.1', port: pair.standby.port });
  const movedAt = performance.now();
  const backAt = await eventually(async () => answers.find((a) => a.at > movedAt && a.status === 201)?.at, 15_000);
  await Bun.sleep(500);
  posting = false;
  await Promise.all(posters);

  // Nothing but 201 and 503 (in its envelope), whatever moment a request met.
  expect(answers.filter((a) => a.status !== 201 && a.status !== 503).map(({ status, body }) => ({ status, body }))).toEqual([]);
  const unavailable = answers.filter((a) => a.status === 503);
  expect(unavailable.length).toBeGreaterThan(0);
  for (const a of unavailable) expect(a.body).toEqual({ success: false, error: 'The database is unavailable right now; try again in a moment.' });

  // Every post answered 201 is on the new primary, and so is its delivery.
  admin = connect(pair.standby.url, 2);
  const acknowledged = answers.filter((a) => a.status === 201).map((a) => a.body.data.id as string);
  const kept = await admin<{ id: string }[]>`
    select m.id from messages m join deliveries d on d.message_id = m.id where m.id = any(${acknowledged}::uuid[])`;
  expect(kept.length).toBe(acknowledged.length);
  const beforeKill = answers.filter((a) => a.status === 201 && a.at < killedAt).length;
  expect(beforeKill).toBeGreaterThanOrEqual(50);

  // Every doorbell owed on the new primary goes out: the acknowledged posts', and those of posts
  // that committed while their answer was lost with the primary.
  const owed = (await admin<{ id: string }[]>`select message_id as id from deliveries d join agents a on a.id = d.recipient_id where a.username = 'fo-hooked'`).map(
    (r) => r.id,
  );
  await eventually(async () => owed.every((id) => arrived.has(id)), 20_000).catch(() => {
    throw new Error(`${owed.filter((id) => !arrived.has(id)).length} of ${owed.length} doorbells never arrived`);
  });
  await eventually(async () => {
    const [row] = await admin!<{ n: number }[]>`select count(*)::int as n from deliveries where step = 'accepted'`;
    return row!.n === 0;
  }, 10_000);
  expect(server.proc.exitCode).toBeNull();

  // The LISTEN connection followed the address: a wait held on the new primary wakes at a post.
  const waited = await call(server.base, 'POST', '/api/threads', { key: sender.apiKey, body: { title: 'after', participantUsernames: ['fo-waiter'] } });
  const waiting = call(server.base, 'GET', '/api/deliveries?wait=10', { key: waiter.apiKey });
  await Bun.sleep(200);
  const woke = performance.now();
  const mail = await call(server.base, 'POST', `/api/threads/${waited.body.data.id}/messages`, { key: sender.apiKey, body: { content: 'wake up' } });
  const inbox = await waiting;
  expect(inbox.body.data.map((d: { messageId: string }) => d.messageId)).toEqual([mail.body.data.id]);
  expect(performance.now() - woke).toBeLessThan(2_000);

  // Nothing logged as an error: an outage is warnings (503s, the worker's retries), and each LISTEN
  // came back once.
  expect(server.lines.filter((l) => l.level === 'error')).toEqual([]);
  expect(server.lines.filter((l) => l.event === 'inbox_listener_reconnected')).toHaveLength(1);
  expect(server.lines.filter((l) => l.event === 'agent_cache_listener_reconnected')).toHaveLength(1);
  console.log(
    `failover: ${acknowledged.length} posts acknowledged (${beforeKill} before the kill), ${unavailable.length} answered 503, ` +
      `${owed.length - acknowledged.length} committed without their answer; 201s again ${Math.round(backAt - killedAt)} ms after the kill ` +
      `(${DETECTION_MS} ms of it detection, ${Math.round(movedAt - killedAt - DETECTION_MS)} ms promotion), ${Math.round(backAt - movedAt)} ms after the address moved`,
  );
}, 90_000);
