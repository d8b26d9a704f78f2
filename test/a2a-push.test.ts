import { expect, test } from 'bun:test';
import {
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  ListTaskPushNotificationConfigsRequest,
  SendMessageRequest,
  TaskPushNotificationConfig,
  TaskState,
  type Task,
} from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { a2aClient as connectA2A, listening } from './support/a2a-client';
import { Webhook } from 'standardwebhooks';
import type { TestAgent } from './support/harness';
import { mcpClient } from './support/mcp-client';
import { eventually, receiver } from './support/receiver';
import { useWorkerHarness } from './support/webhooks';
import { createLogger } from '../src/log';
import { rotateSigningSecret } from '../src/domain/agents/signing-secrets';
import { BY_CLI } from '../src/domain/people/audit';

// A2A push notifications with the real worker: a task's moves are pushed to the URL its sender
// configured, with A2A's token and credentials and the sender's Standard Webhooks signature.
// One request at a time per URL, so that a push over its URL's cap is easy to make; a send answers
// at once (A2A_SEND_WAIT_MS 0), blocking or not.
const logLines: Record<string, any>[] = [];
const log = createLogger('debug', (line) => logLines.push(JSON.parse(line)));
const { h } = useWorkerHarness({ WEBHOOK_ENDPOINT_CONCURRENCY: '1', A2A_SEND_WAIT_MS: '0' }, { log });
const pushes = receiver();
const doorbells = receiver();
const server = listening(h);
const a2aClient = (caller: TestAgent, to: string) => connectA2A(server.base(), caller, to);

let sent = 0;
const send = async (client: Client, text: string, configuration?: Record<string, unknown>) =>
  (await client.sendMessage(
    SendMessageRequest.fromJSON({ message: { messageId: `push-${++sent}`, role: 'ROLE_USER', parts: [{ text }] }, ...(configuration ? { configuration } : {}) }),
  )) as Task;

const pushedTo = (path: string) => pushes.received.filter((r) => r.path === path);

test("a task's moves are pushed: signed, with the token and credentials; configurations are listed, read and deleted", async () => {
  const x = await h.agent('push-owner', { webhookUrl: doorbells.url('/x') });
  const y = await h.agent('push-peer');
  const client = await a2aClient(x, y.username);
  const task = await send(client, 'Tell me when you have read it');

  const config = await client.createTaskPushNotificationConfig(
    TaskPushNotificationConfig.fromJSON({ taskId: task.id, id: 'mine', url: pushes.url('/a2a'), token: 'tok-1', authentication: { scheme: 'Bearer', credentials: 'cred-1' } }),
  );
  expect([config.id, config.taskId, config.url, config.token, config.authentication]).toEqual([
    'mine',
    task.id,
    pushes.url('/a2a'),
    'tok-1',
    { scheme: 'Bearer', credentials: 'cred-1' },
  ]);
  const listed = await client.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id }));
  expect(listed.configs.map((c) => c.id)).toEqual(['mine']);
  expect((await client.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: 'mine' }))).url).toBe(pushes.url('/a2a'));

  // The recipient reads it (through MCP): pushed as working.
  const mcp = await mcpClient(server.base(), y.key);
  await mcp.call('read_message', { messageId: task.metadata!.messageId });
  await mcp.close();
  const [read] = await eventually(async () => (pushedTo('/a2a').length >= 1 ? pushedTo('/a2a') : null));
  const headers = Object.fromEntries(read!.headers) as Record<string, string>;
  expect([headers['content-type'], headers['x-a2a-notification-token'], headers.authorization]).toEqual(['application/a2a+json', 'tok-1', 'Bearer cred-1']);
  const verified = new Webhook(x.signingSecret!).verify(read!.raw, headers) as { statusUpdate: { taskId: string; status: { state: string }; metadata: { step: string } } };
  expect([verified.statusUpdate.taskId, verified.statusUpdate.status.state, verified.statusUpdate.metadata.step]).toEqual([
    task.id,
    'TASK_STATE_WORKING',
    'fetched',
  ]);

  // The answer: pushed as completed, without its text (a push is not a read).
  await h.post(y, task.contextId, 'Read, and here is my answer.');
  const done = await eventually(async () => pushedTo('/a2a')[1] ?? null);
  const update = JSON.parse(done.raw).statusUpdate;
  expect([update.status.state, update.status.message.parts[0].text]).toEqual(['TASK_STATE_COMPLETED', 'push-peer answered in the thread.']);
  const [answerToX] = await h.db.sql`select d.fetched_at from deliveries d join agents a on a.id = d.recipient_id where a.username = ${x.username}`;
  expect(answerToX!.fetched_at).toBeNull();

  await client.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: 'mine' }));
  expect((await client.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id }))).configs).toEqual([]);
  const [configs] = await h.db.sql<{ n: number }[]>`select count(*)::int as n from a2a_push_configs`;
  expect(configs!.n).toBe(0);
});

test("during a rotation's grace a push carries the sender's new and old signatures; after it only the new", async () => {
  const x = await h.agent('push-rotated', { webhookUrl: doorbells.url('/rotated') });
  const y = await h.agent('push-rotated-peer');
  const fresh = (await rotateSigningSecret(h.db.sql, BY_CLI, x.username, '1h', 0)).signingSecret;
  const client = await a2aClient(x, y.username);
  const task = await send(client, 'rotated', { taskPushNotificationConfig: { id: 'rotated', url: pushes.url('/rotated') } });
  const verifies = (req: { raw: string; headers: Headers }, secret: string) => {
    try {
      new Webhook(secret).verify(req.raw, Object.fromEntries(req.headers) as Record<string, string>);
      return true;
    } catch {
      return false;
    }
  };
  await h.post(y, task.contextId, 'answered during the grace');
  const during = await eventually(async () => pushedTo('/rotated')[0] ?? null);
  expect([verifies(during, fresh), verifies(during, x.signingSecret!)]).toEqual([true, true]);

  // As if the rotation had been made an hour ago.
  await h.db.sql`
    update agents set previous_signing_secret_until = now(), signing_secret_rotated_at = signing_secret_rotated_at - interval '1 hour'
    where username = ${x.username}`;
  const next = await send(client, 'rotated again', { taskPushNotificationConfig: { id: 'rotated', url: pushes.url('/rotated') } });
  await h.post(y, next.contextId, 'answered after the grace');
  const after = await eventually(async () => pushedTo('/rotated')[1] ?? null);
  expect([verifies(after, fresh), verifies(after, x.signingSecret!)]).toEqual([true, false]);
});

test('a push configuration given with the message; a bad one refuses the message and sends nothing; a failed push is retried', async () => {
  const x = await h.agent('push-sender2');
  const y = await h.agent('push-peer2');
  const client = await a2aClient(x, y.username);
  const refused = await send(client, 'never sent', { taskPushNotificationConfig: { url: 'ftp://example.com/hook' } }).catch((error: Error & { reason?: string }) => [error.reason, error.message]);
  expect(refused).toEqual(['INVALID_PARAMS', 'url must use https://']);
  const [none] = await h.db.sql<{ n: number }[]>`select count(*)::int as n from messages where content = 'never sent'`;
  expect(none!.n).toBe(0);

  pushes.reply((req, i) => (req.path === '/down' && i >= 0 ? new Response('busy', { status: 503 }) : new Response('ok')));
  const task = await send(client, 'with a push', { taskPushNotificationConfig: { id: 'inline', url: pushes.url('/down') } });
  expect(task.status!.state).toBe(TaskState.TASK_STATE_SUBMITTED);
  await h.post(y, task.contextId, 'answered');
  await eventually(async () => (pushedTo('/down').length >= 1 ? true : null));
  const job = await eventually(async () => {
    const [row] = await h.db.sql<{ attempts: number; last_error: string | null }[]>`
      select attempts, last_error from graphile_worker.jobs where task_identifier = 'a2a_push' and last_error is not null`;
    return row ?? null;
  });
  expect(job.attempts).toBe(1);
  expect(job.last_error).toContain('the push was not answered with 2xx: HTTP 503');
  pushes.reply(() => new Response('ok'));
});

test("a push over its URL's cap waits, queued again, instead of holding a worker slot; it goes once the URL is free", async () => {
  const x = await h.agent('cap-sender');
  const y = await h.agent('cap-peer');
  const client = await a2aClient(x, y.username);
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  pushes.reply(async (req) => {
    if (req.path === '/held') await held;
    return new Response('ok');
  });
  const [first, second] = [await send(client, 'first'), await send(client, 'second')];
  for (const [task, id] of [[first, 'one'], [second, 'two']] as const) {
    await client.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: task.id, id, url: pushes.url('/held') }));
  }
  await h.post(y, first.contextId, 'answer to the first');
  await eventually(async () => (pushedTo('/held').length === 1 ? true : null));
  await h.post(y, second.contextId, 'answer to the second');
  const [two] = await h.db.sql<{ id: string }[]>`select id from a2a_push_configs where name = 'two'`;
  const postponed = await eventually(async () => {
    const [job] = await h.db.sql<{ run_at: Date; attempts: number }[]>`
      select run_at, attempts from graphile_worker.jobs where key = ${`a2a_push:${two!.id}`} and run_at > now() + interval '500 milliseconds'`;
    return job ?? null;
  });
  expect([postponed.attempts, pushedTo('/held').length]).toEqual([0, 1]);
  release();
  await eventually(async () => (pushedTo('/held').length === 2 ? true : null));
  expect(pushedTo('/held').map((r) => JSON.parse(r.raw).statusUpdate.taskId).sort()).toEqual([first.id, second.id].sort());
  pushes.reply(() => new Response('ok'));
});

test('a receiver that does not take a push (an error, a redirect) is its own health: a warning without a stack, never an error', async () => {
  const x = await h.agent('push-health-sender');
  const y = await h.agent('push-health-peer');
  const client = await a2aClient(x, y.username);
  pushes.reply((req) =>
    req.path === '/failing' ? new Response('down', { status: 500 }) : req.path === '/moved' ? new Response(null, { status: 302, headers: { location: '/elsewhere' } }) : new Response('ok'),
  );
  for (const path of ['/failing', '/moved']) {
    const task = await send(client, `pushed to ${path}`, { taskPushNotificationConfig: { id: path.slice(1), url: pushes.url(path) } });
    await h.post(y, task.contextId, 'answered');
  }
  const configs = (await h.db.sql<{ id: string }[]>`select id from a2a_push_configs where name in ('failing', 'moved')`).map((c) => c.id);
  const warned = await eventually(async () => {
    const lines = logLines.filter((l) => l.event === 'push_failed' && configs.includes(l.config));
    return lines.length >= 2 ? lines : null;
  });
  expect(warned.map((l) => [l.level, l.attempt, l.of, l.error]).sort()).toEqual([
    ['warn', 1, 6, 'the push was not answered with 2xx: HTTP 302'],
    ['warn', 1, 6, 'the push was not answered with 2xx: HTTP 500'],
  ]);
  expect(warned.map((l) => JSON.stringify(l)).filter((l) => l.includes('    at '))).toEqual([]);
  expect(logLines.filter((l) => l.level === 'error')).toEqual([]);
  pushes.reply(() => new Response('ok'));
});
