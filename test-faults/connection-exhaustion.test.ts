import { afterAll, beforeAll, expect, test } from 'bun:test';
import { uniqueName, useHarness } from '../test/support/harness';
import { pgGate } from '../test/support/pg-gate';
import { eventually, receiver } from '../test/support/receiver';
import { call, startService, type Service } from './support/service';

// PostgreSQL out of connections while doorbells are owed, under the real server process: requests
// get 503 in the envelope meanwhile, the process stays up, and once connections free up every
// doorbell is rung without anyone stepping in.
const h = useHarness();
let gate: ReturnType<typeof pgGate>;
const servers = new Set<Service>();
beforeAll(() => {
  gate = pgGate({ host: new URL(h.db.url).hostname, port: Number(new URL(h.db.url).port || 5432) });
});
// Each test stops its server itself; this is for a test that failed before it could (a stop that
// has not ended in 15 s is ended with kill -9).
afterAll(async () => {
  for (const server of servers) await Promise.race([server.stop(), Bun.sleep(15_000).then(() => server.kill9())]);
  gate?.stop();
});
const lastWords = (service: Service) => service.lines.slice(-30).map((l) => JSON.stringify(l)).join('\n');
// The handler takes its time, so that doorbells are in flight when the connections go.
const hook = receiver(async () => {
  await Bun.sleep(200);
  return new Response('ok');
});

// The real server, its connections through the gate (open), and a thread to an agent with a webhook.
async function serverThroughGate(agentName: string, hookPath: string) {
  gate.open();
  const service = await startService({ DATABASE_URL: gate.url(h.db.url), DB_POOL_SIZE: '4', DB_CONNECT_TIMEOUT_S: '2' });
  servers.add(service);
  const sender = await h.agent(uniqueName('sender'));
  const hooked = await h.agent(uniqueName(agentName), { webhookUrl: hook.url(hookPath) });
  const threadId = await h.thread(sender, [hooked]);
  const post = (content: string) => call(service.base, 'POST', `/api/threads/${threadId}/messages`, { key: sender.key, body: { content } });
  return { service, sender, threadId, post };
}

test('doorbells owed when PostgreSQL runs out of connections are all rung once it has some again', async () => {
  const { service, threadId, post } = await serverThroughGate('hooked', '/exhausted');
  for (let i = 0; i < 40; i++) expect((await post(`owed ${i}`)).status).toBe(201);

  // Every connection the service holds is cut, and PostgreSQL refuses new ones.
  gate.close();
  gate.cutAll();
  // A client connection reused from before the cut may be reset under it (status 0); the answer of
  // the server, which stays up (checked below), is what counts.
  let refused = await post('while full');
  for (let i = 0; i < 3 && refused.status === 0; i++) refused = await post('while full');
  if (refused.status !== 503) console.log('exhaustion: no 503 while cut off\n', lastWords(service));
  expect([refused.status, refused.body]).toEqual([503, { success: false, error: 'The database is unavailable right now; try again in a moment.' }]);
  expect(service.proc.exitCode).toBeNull();
  await Bun.sleep(8_000);
  const [waiting] = await h.db.sql`
    select count(*)::int as n from deliveries d join messages m on m.id = d.message_id
    where m.thread_id = ${threadId} and d.step = 'accepted'`;
  expect(waiting!.n).toBeGreaterThan(0);

  gate.open();
  await eventually(async () => {
    const [left] = await h.db.sql`
      select count(*)::int as n from deliveries d join messages m on m.id = d.message_id
      where m.thread_id = ${threadId} and d.step <> 'notified'`;
    return left!.n === 0;
  }, 60_000).catch(async (error) => {
    // What CI needs to tell why: the jobs still owed and the server's last words.
    const jobs = await h.db.sql`
      select id::text, attempts, last_error, locked_at, locked_by, run_at from graphile_worker.jobs order by id`;
    console.log('exhaustion: jobs left', JSON.stringify(jobs), '\n', lastWords(service));
    throw error;
  });
  expect(service.proc.exitCode).toBeNull();
  // The outage is logged as warnings; nothing in it is a fault.
  expect(service.lines.filter((l) => l.level === 'error')).toEqual([]);
  expect(service.lines.some((l) => l.event === 'database_unavailable')).toBe(true);
  // And it stops cleanly afterwards, before the harness drops its database.
  const stopping = performance.now();
  expect(await service.stop()).toBe(0);
  console.log(`exhaustion: stopped in ${Math.round(performance.now() - stopping)} ms`);
  expect(service.lines.filter((l) => l.level === 'error')).toEqual([]);
  servers.delete(service);
}, 120_000);

// The worker's two connections for the doorbell's own statements (db/plan-keeping-connection.ts)
// are cut while PostgreSQL refuses new ones, and the query pool keeps the connections it has: the
// statements go over the pool meanwhile, and each doorbell is rung once. Sent to a connection that
// could not reopen, the record failed, the pool's "is the database back?" answered yes, and the
// doorbell was sent again, over and over.
test("doorbells ring once each while the doorbell statements' own connections cannot reopen", async () => {
  const { service, sender, post: send } = await serverThroughGate('kept-plans', '/kept-plans');
  const post = async (content: string) => {
    const posted = await send(content);
    expect(posted.status).toBe(201);
    return posted.body.data.id as string;
  };
  const ringsOf = (messageId: string) => hook.received.filter((r) => r.path === '/kept-plans' && r.raw.includes(messageId)).length;
  // Warm: the worker learns the secret, so the next doorbells ring as prepared by their post; and
  // the query pool opens all four of its connections, as it may not once the gate is shut.
  const warm = await post('warm');
  await eventually(async () => ringsOf(warm) === 1, 10_000);
  const threads = await Promise.all(Array.from({ length: 12 }, () => call(service.base, 'GET', '/api/threads', { key: sender.key })));
  expect(threads.map((t) => t.status)).toEqual(Array(12).fill(200));

  gate.close();
  const cut = await h.db.sql<{ pid: number }[]>`
    select pg_terminate_backend(pid), pid from pg_stat_activity
    where datname = current_database() and application_name like 'agent-messaging-service: doorbell%'`;
  expect(cut).toHaveLength(2);
  // One at a time, so that the query pool, now carrying the doorbells' statements too, needs no
  // connection it does not have.
  const messages: string[] = [];
  for (let i = 0; i < 5; i++) {
    const id = await post(`while cut ${i}`);
    messages.push(id);
    await eventually(async () => {
      const [row] = await h.db.sql<{ step: string }[]>`select step::text from deliveries where message_id = ${id}`;
      return row!.step === 'notified';
    }, 10_000);
  }
  await Bun.sleep(1_000);
  expect(messages.map(ringsOf)).toEqual([1, 1, 1, 1, 1]);
  const attempts = await h.db.sql<{ n: number }[]>`
    select count(*)::int as n from delivery_attempts a join deliveries d on d.id = a.delivery_id
    where d.message_id = any(${messages}::uuid[]) group by d.id`;
  expect(attempts.map((a) => a.n)).toEqual([1, 1, 1, 1, 1]);

  gate.open();
  expect(service.lines.filter((l) => l.level === 'error')).toEqual([]);
  expect(await service.stop()).toBe(0);
  servers.delete(service);
}, 60_000);
