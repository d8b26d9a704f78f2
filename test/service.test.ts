import { afterAll, beforeAll, expect, test } from 'bun:test';
import { loadConfig } from '../src/config';
import { createAgent } from '../src/domain/agents/agents';
import { createLogger } from '../src/log';
import { createService, type HttpService } from '../src/service';
import { createTestDatabase, publicFirst, refuseWakeUps } from './support/database';
import { callApp } from './support/harness';
import { eventually } from './support/receiver';
import { BY_CLI } from '../src/domain/people/audit';

// createService wires every part with the logger it is given, so that nothing reports to a
// process-wide hook that one way of starting the service sets and another forgets.
const lines: Record<string, unknown>[] = [];
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let service: HttpService;

beforeAll(async () => {
  database = await createTestDatabase();
  const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
  service = await createService(loadConfig({ DATABASE_URL: publicFirst(database.url) }), { log, http: true, worker: false });
  await refuseWakeUps(service.sql);
});

afterAll(async () => {
  await service?.stop();
  await database?.drop();
});

test('a wake-up that fails after a post commits is logged through the logger the service was given', async () => {
  const sender = await createAgent(service.sql, BY_CLI, { username: 'quiet-sender' }, { allowLocal: false });
  await createAgent(service.sql, BY_CLI, { username: 'quiet-recipient' }, { allowLocal: false });
  const as = { authorization: `Bearer ${sender.apiKey}` };
  const opened = await callApp(service.app, 'POST', '/api/threads', {
    headers: as,
    body: { title: 'Quiet', participantUsernames: ['quiet-recipient'] },
  });
  expect(opened.status).toBe(201);
  const posted = await callApp(service.app, 'POST', `/api/threads/${opened.body.data.id}/messages`, { headers: as, body: { content: 'hello' } });
  expect(posted.status).toBe(201);

  const failed = await eventually(async () => lines.find((l) => l.event === 'announce_failed'));
  const { time: _, ...line } = failed;
  expect(line).toEqual({ level: 'warn', event: 'announce_failed', error: 'wake-ups refused', requestId: posted.headers.get('x-request-id') });
  // Only the wake-up was lost: the message and its delivery are stored.
  const [stored] = await service.sql`select count(*)::int as deliveries from deliveries where message_id = ${posted.body.data.id}`;
  expect(stored).toEqual({ deliveries: 1 });
});
