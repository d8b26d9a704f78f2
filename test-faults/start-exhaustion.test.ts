import { afterAll, beforeAll, expect, test } from 'bun:test';
import { uniqueName, useHarness } from '../test/support/harness';
import { pgGate } from '../test/support/pg-gate';
import { eventually, receiver } from '../test/support/receiver';
import { call, startService, type Service } from './support/service';

// PostgreSQL runs out of connections part-way through a start, under the real server process: the
// first query and the migration got theirs, a later step (a LISTEN, the worker's pool) does not.
// The instance waits, saying so, answers 503 meanwhile, and serves once connections free up;
// before, only the first query and the migration waited and the start exited with 1.
const h = useHarness();
let gate: ReturnType<typeof pgGate>;
const servers: Service[] = [];
beforeAll(() => {
  gate = pgGate({ host: new URL(h.db.url).hostname, port: Number(new URL(h.db.url).port || 5432) });
});
afterAll(async () => {
  for (const server of servers) await Promise.race([server.stop(), Bun.sleep(15_000).then(() => server.kill9())]);
  gate?.stop();
});
const rung: string[] = [];
const hook = receiver((req) => {
  rung.push(JSON.parse(req.raw).data.messageId);
  return new Response('ok');
});

// Connections a start opens, in order: the query pool's first (the first query and our
// migrations), graphile-worker's migration (closed after it), the shared LISTEN, the two for the
// doorbell's own statements, then the worker's pool. Whether the step was reached shows in the
// connections sitting in LISTEN.
const steps = [
  { name: 'the shared LISTEN', admitted: 2, listening: 0 },
  { name: "the doorbell statements' connections", admitted: 3, listening: 1 },
  { name: "the worker's pool", admitted: 5, listening: 1 },
];
const listening = async () =>
  (await h.db.sql<{ n: number }[]>`
    select count(*)::int as n from pg_stat_activity where datname = current_database() and query ilike 'listen%'`)[0]!.n;

for (const step of steps) {
  test(`a start that runs out of connections at ${step.name} waits, answers 503 meanwhile, then serves`, async () => {
    const listeningBefore = await listening();
    gate.admit(step.admitted);
    const server = await startService(
      { DATABASE_URL: gate.url(h.db.url), DB_POOL_SIZE: '4' },
      { until: (line) => line.event === 'database_busy' && line.attempt === 2 },
    );
    servers.push(server);
    expect(server.lines.some((l) => l.event === 'listening')).toBe(false);
    expect(server.lines.filter((l) => l.event === 'database_busy').map((l) => l.error)).toEqual([
      'sorry, too many clients already',
      'sorry, too many clients already',
    ]);

    // The port answers from the start: 503 in the envelope with a request id, not a refusal.
    const res = await fetch(`${server.base}/api/threads`, { headers: { 'x-request-id': 'starting-1' } });
    expect(res.status).toBe(503);
    expect(res.headers.get('x-request-id')).toBe('starting-1');
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.json()).toEqual({ success: false, error: 'The database is unavailable right now; try again in a moment.' });
    expect((await call(server.base, 'GET', '/health')).status).toBe(503);
    expect(server.proc.exitCode).toBeNull();
    expect((await listening()) - listeningBefore).toBe(step.listening);

    gate.open();
    await eventually(async () => server.lines.some((l) => l.event === 'listening'), 15_000);
    expect((await call(server.base, 'GET', '/health')).body).toEqual({ success: true, data: { status: 'ok' } });
    // The doorbell statements' two connections, once: a start that failed let go of the ones it
    // had opened, and none fell back to the query pool.
    const [own] = await h.db.sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and application_name like 'agent-messaging-service: doorbell%'`;
    expect(own!.n).toBe(2);
    const sender = await h.agent(uniqueName('sender'));
    const hooked = await h.agent(uniqueName('hooked'), { webhookUrl: hook.url('/start') });
    const threadId = await h.thread(sender, [hooked]);
    const posted = await call(server.base, 'POST', `/api/threads/${threadId}/messages`, { key: sender.key, body: { content: 'after the wait' } });
    expect(posted.status).toBe(201);
    await eventually(async () => rung.includes(posted.body.data.id), 10_000);
    expect(server.lines.filter((l) => l.level === 'error')).toEqual([]);
    expect(await server.stop()).toBe(0);
  }, 60_000);
}
