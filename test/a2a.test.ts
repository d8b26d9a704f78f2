import { describe, expect, test } from 'bun:test';
import {
  CancelTaskRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTasksRequest,
  Role,
  SendMessageRequest,
  SubscribeToTaskRequest,
  TaskPushNotificationConfig,
  TaskState,
  type Task,
} from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { a2aClient as connectA2A, a2aClientAt as connectA2AAt, listening } from './support/a2a-client';
import { useHarness, type TestAgent } from './support/harness';
import { mcpClient } from './support/mcp-client';
import { eventually } from './support/receiver';
import { setArchived, setCardListed } from '../src/domain/agents/agents';
import { removeParticipant } from '../src/domain/threads/threads';
import { claimPush, finishPush } from '../src/domain/deliveries/push-configs';
import { BY_CLI } from '../src/domain/people/audit';

// The A2A door driven by the official A2A JavaScript SDK's client over real HTTP: an agent of
// ours reached by another through its card, its messages kept in the mailbox, the task following
// the delivery, and the same thread seen through the HTTP API and MCP. A send answers at once here,
// blocking or not (A2A_SEND_WAIT_MS 0): a held send has its tests in a2a-send-wait.test.ts.
const h = useHarness({ A2A_SEND_WAIT_MS: '0' });
const server = listening(h);
const a2aClient = (caller: TestAgent, to: string) => connectA2A(server.base(), caller, to);

let sent = 0;
const message = (text: string, extra: Record<string, unknown> = {}) =>
  SendMessageRequest.fromJSON({ message: { messageId: `msg-${++sent}`, role: 'ROLE_USER', parts: [{ text }], ...extra } });

const send = async (client: Client, request: SendMessageRequest) => {
  const result = await client.sendMessage(request);
  if ('messageId' in result) throw new Error('expected a task');
  return result as Task;
};

const textOf = (task: Task) => task.status?.message?.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected a refusal');
    },
    (error: Error & { reason?: string }) => [error.reason, error.message],
  );

describe('the agent card', () => {
  test('is served to agents of the service only; it names JSON-RPC at the agent’s address and the agent key as bearer', async () => {
    const caller = await h.agent('card-reader');
    await h.agent('card-owner');
    const stranger = await h.call('GET', '/a2a/agents/card-owner/.well-known/agent-card.json');
    expect([stranger.status, stranger.body]).toEqual([
      401,
      { success: false, error: 'Authorization header is missing; send "Authorization: Bearer agt_…".' },
    ]);
    const unknown = await h.call('GET', '/a2a/agents/nobody-here/.well-known/agent-card.json', { key: caller.key });
    expect([unknown.status, unknown.body]).toEqual([404, { success: false, error: 'No agent named nobody-here.' }]);
    const card = await h.call('GET', '/a2a/agents/card-owner/.well-known/agent-card.json', { key: caller.key });
    expect(card.status).toBe(200);
    expect(card.body).toMatchObject({
      name: 'card-owner',
      supportedInterfaces: [{ url: 'http://localhost/a2a/agents/card-owner/', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
      capabilities: { streaming: true, pushNotifications: true, extendedAgentCard: false },
      securitySchemes: { agentKey: { httpAuthSecurityScheme: { scheme: 'Bearer', bearerFormat: 'agt_ key' } } },
      securityRequirements: [{ schemes: { agentKey: {} } }],
      defaultInputModes: ['text/plain'],
      skills: [{ id: 'messaging', name: 'Messaging' }],
    });
    // The SDK's client reads it and talks to the address it names.
    const client = await a2aClient(caller, 'card-owner');
    expect((await client.getAgentCard()).name).toBe('card-owner');
  });

  test('a client created from the address the card names finds the card below it, and sends there', async () => {
    const caller = await h.agent('card-follower');
    await h.agent('card-named');
    const card = await (await a2aClient(caller, 'card-named')).getAgentCard();
    const address = card.supportedInterfaces[0]!.url;
    expect(address).toBe(`${server.base()}/a2a/agents/card-named/`);
    const client = await connectA2AAt(address, caller);
    expect((await client.getAgentCard()).name).toBe('card-named');
    const task = await send(client, message('Found you through your card'));
    expect([task.status!.state, task.history[0]!.parts[0]!.content]).toEqual([
      TaskState.TASK_STATE_SUBMITTED,
      { $case: 'text', value: 'Found you through your card' },
    ]);
  });

  test('a card its owner listed is anyone’s to read; to a stranger an unlisted name and no name read alike', async () => {
    await h.agent('listed-owner');
    const missing = { success: false, error: 'Authorization header is missing; send "Authorization: Bearer agt_…".' };
    for (const name of ['listed-owner', 'no-such-name']) {
      const res = await h.call('GET', `/a2a/agents/${name}/.well-known/agent-card.json`);
      expect([name, res.status, res.headers.get('www-authenticate'), res.body]).toEqual([name, 401, 'Bearer realm="agent-messaging-service"', missing]);
    }
    expect(await setCardListed(h.db.sql, BY_CLI, 'listed-owner', true)).toEqual({ username: 'listed-owner', listed: true });
    const listed = await h.call('GET', '/a2a/agents/listed-owner/.well-known/agent-card.json');
    expect([listed.status, listed.body.name]).toEqual([200, 'listed-owner']);
    // Sending still takes a key.
    const send = await h.call('POST', '/a2a/agents/listed-owner', { body: { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: {} } });
    expect(send.status).toBe(401);
    await setArchived(h.db.sql, BY_CLI, 'listed-owner', true);
    expect((await h.call('GET', '/a2a/agents/listed-owner/.well-known/agent-card.json')).status).toBe(401);
  });
});

describe('a message and its task', () => {
  test('a new context opens a thread of the two; the task is submitted, working once read, completed by the answer', async () => {
    const x = await h.agent('a2a-sender');
    const y = await h.agent('a2a-recipient');
    const client = await a2aClient(x, y.username);

    const asked = message('What did we decide about the invoice format?');
    const task = await send(client, asked);
    expect(task.status!.state).toBe(TaskState.TASK_STATE_SUBMITTED);
    expect(textOf(task)).toBe('Accepted for a2a-recipient, in its inbox.');
    const threadId = task.contextId;
    const thread = await h.call('GET', `/api/threads/${threadId}`, { key: y.key });
    expect(thread.status).toBe(200);
    expect([thread.body.data.title, thread.body.data.participants]).toEqual([
      'What did we decide about the invoice format?',
      [{ username: 'a2a-recipient' }, { username: 'a2a-sender' }],
    ]);
    const [delivery] = await h.db.sql`select d.id, d.step from deliveries d join agents a on a.id = d.recipient_id where a.username = ${y.username}`;
    expect([task.id, delivery!.step]).toEqual([delivery!.id, 'accepted']);
    expect(task.history.map((m) => [m.role, m.parts[0]!.content])).toEqual([
      [Role.ROLE_USER, { $case: 'text', value: 'What did we decide about the invoice format?' }],
    ]);

    // The recipient finds it and reads it through MCP; the task is working.
    const mcp = await mcpClient(server.base(), y.key);
    // The history shows the message under the id the client gave it; the service's id is in the metadata.
    expect(task.history[0]!.messageId).toBe(asked.message!.messageId);
    const messageId = task.metadata!.messageId as string;
    const inbox = await mcp.call('check_inbox');
    expect(inbox.data.entries.map((e: { messageId: string; sender: string }) => [e.messageId, e.sender])).toEqual([[messageId, 'a2a-sender']]);
    const read = await mcp.call('read_message', { messageId });
    expect([read.data.content, read.data.threadId]).toEqual(['What did we decide about the invoice format?', threadId]);
    await mcp.close();
    const working = await client.getTask(GetTaskRequest.fromJSON({ id: task.id }));
    expect([working.status!.state, textOf(working), working.metadata!.step]).toEqual([TaskState.TASK_STATE_WORKING, 'a2a-recipient has read it.', 'fetched']);

    // The recipient answers in the thread: the answer completes the task, and reading it records the read.
    const answer = await h.post(y, threadId, 'Net 30, PDF only.');
    const done = await client.getTask(GetTaskRequest.fromJSON({ id: task.id }));
    expect(done.status!.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect([textOf(done), done.status!.message!.role, done.status!.message!.messageId]).toEqual(['Net 30, PDF only.', Role.ROLE_AGENT, answer.id]);
    expect(done.history.map((m) => m.messageId)).toEqual([asked.message!.messageId, answer.id]);
    expect((await client.listTasks(ListTasksRequest.fromJSON({ historyLength: 1, contextId: threadId }))).tasks[0]!.history[0]!.messageId).toBe(
      asked.message!.messageId,
    );
    const [answerRead] = await h.db.sql`select d.step from deliveries d join agents a on a.id = d.recipient_id where d.message_id = ${answer.id} and a.username = ${x.username}`;
    expect(answerRead!.step).toBe('fetched');
  });

  test('a known context continues its thread; a thread the caller is not in is not found; a repeated messageId creates nothing', async () => {
    const x = await h.agent('ctx-sender');
    const y = await h.agent('ctx-recipient');
    const other = await h.agent('ctx-other');
    const client = await a2aClient(x, y.username);
    const first = await send(client, message('first'));
    const second = await send(client, message('second', { contextId: first.contextId }));
    expect(second.contextId).toBe(first.contextId);
    expect(second.id).not.toBe(first.id);

    const foreign = await h.thread(other, [y], 'Not yours');
    expect(await refusal(client.sendMessage(message('hello', { contextId: foreign })))).toEqual([
      'TASK_NOT_FOUND',
      'No such thread, or you are not a participant.',
    ]);

    const once = SendMessageRequest.fromJSON({ message: { messageId: 'same-id', role: 'ROLE_USER', parts: [{ text: 'only once' }] } });
    const [a, b] = [await send(client, once), await send(client, once)];
    expect(b.id).toBe(a.id);
    const [count] = await h.db.sql<{ n: number }[]>`select count(*)::int as n from messages where content = 'only once'`;
    expect(count!.n).toBe(1);
  });

  test('an answer written after the caller was removed from the thread is none of its business: the task does not learn of it', async () => {
    const x = await h.agent('removed-sender');
    const y = await h.agent('removed-recipient');
    const z = await h.agent('removed-bystander');
    const client = await a2aClient(x, y.username);
    const task = await send(client, message('Still there?', { contextId: await h.thread(x, [y, z], 'Three of us') }));
    await removeParticipant(h.db.sql, BY_CLI, task.contextId, x.username);
    await h.post(y, task.contextId, 'Said after you left');
    const seen = await client.getTask(GetTaskRequest.fromJSON({ id: task.id }));
    expect([seen.status!.state, seen.history.length, seen.metadata!.answerId]).toEqual([TaskState.TASK_STATE_SUBMITTED, 1, null]);
  });

  test('at another agent’s address a task is not found, and nothing is read', async () => {
    const x = await h.agent('addr-sender');
    const y = await h.agent('addr-recipient');
    await h.agent('addr-other');
    const task = await send(await a2aClient(x, y.username), message('to y'));
    await h.post(y, task.contextId, 'the answer');
    const elsewhere = await a2aClient(x, 'addr-other');
    expect(await refusal(elsewhere.getTask(GetTaskRequest.fromJSON({ id: task.id })))).toEqual(['TASK_NOT_FOUND', `No task ${task.id} of yours with this agent.`]);
    expect(await refusal(elsewhere.cancelTask(CancelTaskRequest.fromJSON({ id: task.id })))).toEqual(['TASK_NOT_FOUND', `No task ${task.id} of yours with this agent.`]);
    const [answer] = await h.db.sql`
      select d.step from deliveries d join messages m on m.id = d.message_id join agents a on a.id = d.recipient_id
      where m.content = 'the answer' and a.username = ${x.username}`;
    expect(answer!.step).toBe('accepted');
  });

  test('odd input: blank text, a reused messageId with other text, no version header, odd page sizes', async () => {
    const x = await h.agent('odd-sender');
    const y = await h.agent('odd-recipient');
    const client = await a2aClient(x, y.username);
    const blank = await send(client, message('   '));
    const thread = await h.call('GET', `/api/threads/${blank.contextId}`, { key: x.key });
    expect(thread.body.data.title).toBe('odd-sender to odd-recipient');

    const first = SendMessageRequest.fromJSON({ message: { messageId: 'odd-key', role: 'ROLE_USER', parts: [{ text: 'one' }] } });
    const other = SendMessageRequest.fromJSON({ message: { messageId: 'odd-key', role: 'ROLE_USER', parts: [{ text: 'another' }] } });
    await send(client, first);
    expect(await refusal(client.sendMessage(other))).toEqual([
      'INVALID_PARAMS',
      'messageId odd-key was already used for a different request; use a new key for a new request.',
    ]);

    const bare = await h.call('POST', `/a2a/agents/${y.username}`, { key: x.key, body: { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: {} } });
    expect([bare.status, bare.body.error.code]).toEqual([200, -32009]);

    // A page size that is not a whole number from 1 is cut to one, or read as the default (50).
    for (const [pageSize, answered] of [[1.5, [1, 1, 2]], ['abc', [2, 50, 2]], [-3, [2, 50, 2]]] as const) {
      const listed = await h.call('POST', `/a2a/agents/${y.username}`, {
        key: x.key,
        headers: { 'a2a-version': '1.0' },
        body: { jsonrpc: '2.0', id: 2, method: 'ListTasks', params: { pageSize } },
      });
      const { tasks, pageSize: size, totalSize } = listed.body.result;
      expect([pageSize, listed.status, tasks.length, size, totalSize]).toEqual([pageSize, 200, ...answered]);
    }
  });

  test('refusals carry the contract’s sentence as A2A errors, and write nothing', async () => {
    const x = await h.agent('ref-sender');
    const y = await h.agent('ref-recipient');
    const client = await a2aClient(x, y.username);
    const long = 'x'.repeat(201);
    expect(await refusal(client.sendMessage(message(long)))).toEqual([
      'INVALID_PARAMS',
      'summary is required when content is longer than 200 characters; add one and resend',
    ]);
    const summarised = await send(client, message(long, { metadata: { summary: 'A long one' } }));
    expect(summarised.history[0]!.metadata).toMatchObject({ summary: 'A long one' });
    // The same refusal, in the same words, through MCP and the HTTP API in that thread.
    const mcp = await mcpClient(server.base(), x.key);
    expect((await mcp.call('send_message', { threadId: summarised.contextId, content: long })).error).toBe(
      'summary is required when content is longer than 200 characters; add one and resend',
    );
    await mcp.close();
    const http = await h.call('POST', `/api/threads/${summarised.contextId}/messages`, { key: x.key, body: { content: long } });
    expect([http.status, http.body.error]).toEqual([400, 'summary is required when content is longer than 200 characters; add one and resend']);
    const extended = await h.call('POST', `/a2a/agents/${y.username}`, {
      key: x.key,
      headers: { 'a2a-version': '1.0' },
      body: { jsonrpc: '2.0', id: 3, method: 'GetExtendedAgentCard', params: {} },
    });
    expect([extended.body.error.code, extended.body.error.message]).toEqual([-32007, 'This agent has no extended card: its card says all there is.']);
    expect(
      await refusal(
        client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId: 'with-data', role: 'ROLE_USER', parts: [{ data: { a: 1 } }] } })),
      ),
    ).toEqual(['CONTENT_TYPE_NOT_SUPPORTED', 'A data part cannot be carried: send text, and files as url or raw parts.']);
    expect(await refusal(client.sendMessage(message('follow-up', { taskId: summarised.id })))).toEqual([
      'UNSUPPORTED_OPERATION',
      'Each message is a task of its own here, complete once it is answered: to follow up, send a new message with the same contextId and no taskId.',
    ]);
    expect(await refusal(client.cancelTask(CancelTaskRequest.fromJSON({ id: summarised.id })))).toEqual([
      'TASK_NOT_CANCELABLE',
      "A message accepted into ref-recipient's mailbox stays there: it cannot be withdrawn. Send a follow-up with the same contextId instead.",
    ]);
    const [count] = await h.db.sql<{ n: number }[]>`select count(*)::int as n from messages m join agents a on a.id = m.sender_agent_id where a.username = ${x.username}`;
    expect(count!.n).toBe(1);
  });

  test('tasks are the caller’s own: another agent’s task is not found; the list pages and filters by state and context', async () => {
    const x = await h.agent('list-sender');
    const y = await h.agent('list-recipient');
    const z = await h.agent('list-stranger');
    const client = await a2aClient(x, y.username);
    const tasks = [];
    for (let i = 0; i < 3; i++) tasks.push(await send(client, message(`number ${i}`)));
    await h.post(y, tasks[0]!.contextId, 'answered');

    const stranger = await a2aClient(z, y.username);
    expect(await refusal(stranger.getTask(GetTaskRequest.fromJSON({ id: tasks[0]!.id })))).toEqual([
      'TASK_NOT_FOUND',
      `No task ${tasks[0]!.id} of yours with this agent.`,
    ]);

    const first = await client.listTasks(ListTasksRequest.fromJSON({ pageSize: 2 }));
    expect([first.tasks.map((t) => t.id), first.totalSize, first.pageSize]).toEqual([[tasks[2]!.id, tasks[1]!.id], 3, 2]);
    const rest = await client.listTasks(ListTasksRequest.fromJSON({ pageSize: 2, pageToken: first.nextPageToken }));
    expect([rest.tasks.map((t) => t.id), rest.nextPageToken]).toEqual([[tasks[0]!.id], '']);
    const completed = await client.listTasks(ListTasksRequest.fromJSON({ status: 'TASK_STATE_COMPLETED' }));
    expect(completed.tasks.map((t) => [t.id, t.status!.state])).toEqual([[tasks[0]!.id, TaskState.TASK_STATE_COMPLETED]]);
    const submitted = await client.listTasks(ListTasksRequest.fromJSON({ status: 'TASK_STATE_SUBMITTED', contextId: tasks[1]!.contextId }));
    expect(submitted.tasks.map((t) => t.id)).toEqual([tasks[1]!.id]);
    expect(await refusal(client.listTasks(ListTasksRequest.fromJSON({ pageToken: 'not-a-token' })))).toEqual([
      'INVALID_PARAMS',
      'pageToken must be the nextPageToken of the previous page.',
    ]);
  });

  test('a streamed message: the task, then an update as it is read and when it is answered; the stream ends there', async () => {
    const x = await h.agent('stream-sender');
    const y = await h.agent('stream-recipient');
    const client = await a2aClient(x, y.username);
    const events = client.sendMessageStream(message('Are you there?'));
    const next = async () => (await events.next()).value as { payload?: { $case: string; value: any } } | undefined;
    const first = await next();
    expect([first!.payload!.$case, first!.payload!.value.status.state]).toEqual(['task', TaskState.TASK_STATE_SUBMITTED]);
    const task = first!.payload!.value as Task;

    const mcp = await mcpClient(server.base(), y.key);
    await mcp.call('read_message', { messageId: task.metadata!.messageId });
    await mcp.close();
    const read = await next();
    expect([read!.payload!.$case, read!.payload!.value.taskId, read!.payload!.value.status.state, read!.payload!.value.metadata.step]).toEqual([
      'statusUpdate',
      task.id,
      TaskState.TASK_STATE_WORKING,
      'fetched',
    ]);

    const answer = await h.post(y, task.contextId, 'Yes.');
    const answered = await next();
    expect([answered!.payload!.value.status.state, answered!.payload!.value.status.message.messageId]).toEqual([TaskState.TASK_STATE_COMPLETED, answer.id]);
    expect((await events.next()).done).toBe(true);

    // Subscribing to a final task gives the task and ends.
    const again = [];
    for await (const event of client.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: task.id }))) again.push(event.payload?.$case);
    expect(again).toEqual(['task']);
  });

  test('a subscription follows a task from where it is; a refusal comes before the stream; archiving the caller ends it', async () => {
    const x = await h.agent('sub-sender');
    const y = await h.agent('sub-recipient');
    const client = await a2aClient(x, y.username);
    const task = await send(client, message('Follow me'));
    expect(await refusal(client.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: '01a21cc7-45c5-7600-b9f9-010510e75403' })).next())).toEqual([
      'TASK_NOT_FOUND',
      'No task 01a21cc7-45c5-7600-b9f9-010510e75403 of yours with this agent.',
    ]);
    const events = client.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: task.id }));
    expect((await events.next()).value?.payload?.$case).toBe('task');
    const ended = events.next();
    await setArchived(h.db.sql, BY_CLI, x.username, true);
    expect((await ended).done).toBe(true);
    await setArchived(h.db.sql, BY_CLI, x.username, false);
  });

  test('push-notification configurations: their URL held to the webhook rules, only on the caller’s own task, ten at most', async () => {
    const x = await h.agent('pushcfg-sender');
    const y = await h.agent('pushcfg-recipient');
    const z = await h.agent('pushcfg-stranger');
    const client = await a2aClient(x, y.username);
    const task = await send(client, message('hello'));
    const config = (fields: Record<string, unknown>) => TaskPushNotificationConfig.fromJSON({ taskId: task.id, ...fields });
    expect(await refusal(client.createTaskPushNotificationConfig(config({ url: 'ftp://example.com/hook' })))).toEqual(['INVALID_PARAMS', 'url must use https://']);
    expect(await refusal(client.createTaskPushNotificationConfig(config({ url: '' })))).toEqual(['INVALID_PARAMS', 'url is required: where to send the notifications']);
    expect(await refusal(client.createTaskPushNotificationConfig(config({ id: 'has space', url: `${server.base()}/hook` })))).toEqual([
      'INVALID_PARAMS',
      'id must be 1 to 64 printable ASCII characters without spaces',
    ]);
    const stranger = await a2aClient(z, y.username);
    expect(await refusal(stranger.createTaskPushNotificationConfig(config({ url: `${server.base()}/hook` })))).toEqual(['TASK_NOT_FOUND', `No task ${task.id} of yours with this agent.`]);
    for (let i = 0; i < 10; i++) await client.createTaskPushNotificationConfig(config({ id: `c${i}`, url: `${server.base()}/hook/${i}` }));
    // The same id replaces, past the bound too; an eleventh is refused.
    expect((await client.createTaskPushNotificationConfig(config({ id: 'c0', url: `${server.base()}/hook/again` }))).url).toBe(`${server.base()}/hook/again`);
    expect(await refusal(client.createTaskPushNotificationConfig(config({ id: 'c10', url: `${server.base()}/hook/10` })))).toEqual([
      'INVALID_PARAMS',
      'A task has at most 10 push-notification configurations; delete one first.',
    ]);
    expect(await refusal(client.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: 'nope' })))).toEqual([
      'TASK_NOT_FOUND',
      `No push-notification configuration nope on task ${task.id}.`,
    ]);
    const [stored] = await h.db.sql<{ n: number }[]>`select count(*)::int as n from a2a_push_configs where delivery_id = ${task.id}`;
    expect(stored!.n).toBe(10);
  });

  test('a token or credentials an HTTP header cannot carry are refused when configured, naming the field; nothing is written', async () => {
    const x = await h.agent('pushhdr-sender');
    const y = await h.agent('pushhdr-recipient');
    const client = await a2aClient(x, y.username);
    const task = await send(client, message('hello'));
    const url = `${server.base()}/hook`;
    const header = (field: string) =>
      `${field} must be at most 1024 printable ASCII characters (letters, digits, punctuation, spaces): it is sent in an HTTP header`;
    const cases = [
      [{ token: 'tok\u0007en' }, 'token'],
      [{ token: 'jeton-été' }, 'token'],
      [{ token: 'x'.repeat(1025) }, 'token'],
      [{ authentication: { scheme: 'Bearer', credentials: 'abc\r\nX-Injected: 1' } }, 'authentication.credentials'],
      [{ authentication: { scheme: 'Bearer', credentials: 'clé' } }, 'authentication.credentials'],
      [{ authentication: { scheme: 'Bea\u0000rer', credentials: 'abc' } }, 'authentication.scheme'],
    ] as const;
    for (const [i, [fields, field]] of cases.entries()) {
      const config = TaskPushNotificationConfig.fromJSON({ taskId: task.id, url, ...fields });
      expect([field, await refusal(client.createTaskPushNotificationConfig(config))]).toEqual([field, ['INVALID_PARAMS', header(field)]]);
      const withMessage = SendMessageRequest.fromJSON({
        message: { messageId: `pushhdr-${i}`, role: 'ROLE_USER', parts: [{ text: 'never sent' }] },
        configuration: { taskPushNotificationConfig: { url, ...fields } },
      });
      expect([field, await refusal(client.sendMessage(withMessage))]).toEqual([field, ['INVALID_PARAMS', header(field)]]);
    }
    // A tab and spaces are a header's own.
    const fine = await client.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: task.id, url, token: 'a b\tc' }));
    expect(fine.token).toBe('a b\tc');
    const [stored] = await h.db.sql<{ n: number }[]>`select count(*)::int as n from a2a_push_configs where delivery_id = ${task.id}`;
    const [sent] = await h.db.sql<{ n: number }[]>`select count(*)::int as n from messages where content = 'never sent'`;
    expect([stored!.n, sent!.n]).toEqual([1, 0]);
  });

  test('a push is queued by the move itself: a step, and the answer once, not every later message; one push per configuration at a time', async () => {
    const x = await h.agent('queue-sender');
    const y = await h.agent('queue-recipient');
    const client = await a2aClient(x, y.username);
    const task = await send(client, message('Queue me'));
    await client.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: task.id, id: 'q', url: `${server.base()}/hook` }));
    const [config] = await h.db.sql<{ id: string }[]>`select id from a2a_push_configs where delivery_id = ${task.id}`;
    const job = async () =>
      (await h.db.sql<{ revision: number }[]>`select revision from graphile_worker.jobs where key = ${`a2a_push:${config!.id}`}`)[0]?.revision ?? null;
    expect(await job()).toBeNull();
    await h.call('GET', `/api/threads/${task.contextId}/messages`, { key: y.key });
    expect(await job()).toBe(0);
    await h.post(y, task.contextId, 'the answer');
    expect(await job()).toBe(1);
    await h.post(y, task.contextId, 'and more');
    expect(await job()).toBe(1);
    expect((await h.db.sql`select answered from a2a_push_configs where id = ${config!.id}`)[0]!.answered).toBe(true);

    // Held by one push, the configuration turns the next away until then, queued again for that time.
    await h.db.sql`select graphile_worker.remove_job(${`a2a_push:${config!.id}`})`;
    const first = await claimPush(h.db.sql, config!.id, 60_000);
    if (!first || !('config' in first)) throw new Error('expected to hold the configuration');
    expect(first.config.name).toBe('q');
    const second = await claimPush(h.db.sql, config!.id, 60_000);
    if (!second || !('busyUntil' in second)) throw new Error('expected the configuration to be busy');
    const [requeued] = await h.db.sql<{ run_at: Date }[]>`select run_at from graphile_worker.jobs where key = ${`a2a_push:${config!.id}`}`;
    expect(requeued!.run_at.getTime()).toBe(second.busyUntil.getTime());
    await finishPush(h.db.sql, first.config, 'sent');
    const third = await claimPush(h.db.sql, config!.id, 60_000);
    expect(third && 'config' in third ? third.config.pushed : null).toBe('sent');
  });

  test('archiving cuts A2A at once: an archived caller is refused (401), an archived recipient is not found (404)', async () => {
    const x = await h.agent('arch-sender');
    const y = await h.agent('arch-recipient');
    const client = await a2aClient(x, y.username);
    await send(client, message('before'));
    await setArchived(h.db.sql, BY_CLI, y.username, true);
    const gone = await h.call('POST', `/a2a/agents/${y.username}`, {
      key: x.key,
      body: { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: { messageId: 'late', role: 'ROLE_USER', parts: [{ text: 'hi' }] } } },
    });
    expect([gone.status, gone.body]).toEqual([404, { success: false, error: `No agent named ${y.username}.` }]);
    await setArchived(h.db.sql, BY_CLI, y.username, false);
    await setArchived(h.db.sql, BY_CLI, x.username, true);
    // Refused as soon as this instance hears of the archive (its key cache is told by the database).
    const refused = await eventually(async () => {
      const res = await h.call('POST', `/a2a/agents/${y.username}`, { key: x.key, body: { jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: 'x' } } });
      return res.status === 200 ? null : res;
    });
    expect([refused.status, refused.body.error]).toEqual([401, 'The API key is not recognised or its agent is archived.']);
  });
});

describe('JSON-RPC 2.0 and the params', () => {
  const post = (key: string, to: string, raw: string, headers: Record<string, string> = { 'a2a-version': '1.0' }) =>
    h.call('POST', `/a2a/agents/${to}`, { key, raw, headers: { 'content-type': 'application/json', ...headers } });
  const messagesOf = async (username: string) =>
    (await h.db.sql<{ n: number }[]>`select count(*)::int as n from messages m join agents a on a.id = m.sender_agent_id where a.username = ${username}`)[0]!.n;

  test('a body that is not JSON is a parse error (-32700), one that is not a request object an invalid request (-32600), with a null id', async () => {
    const x = await h.agent('rpc-sender');
    const y = await h.agent('rpc-recipient');
    const parse = { code: -32700, message: 'Parse error: the request body is not valid JSON.' };
    const invalid = (why: string) => ({ code: -32600, message: `Invalid Request: ${why}` });
    const batch = invalid('a batch (an array) is not taken here; send one request per POST.');
    const version = invalid('jsonrpc must be "2.0".');
    const cases: [string, unknown][] = [
      ['{"jsonrpc":"2.0","id":1,"method":"GetTask",', parse],
      ['', parse],
      ['[]', batch],
      ['[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}]', batch],
      ['"text"', invalid('the body must be a JSON-RPC 2.0 request object.')],
      ['{"id":1,"method":"GetTask","params":{"id":"x"}}', version],
      ['{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"x"}}', version],
      ['{"jsonrpc":"2.0","id":1,"params":{}}', invalid('method must be the name of a method.')],
      ['{"jsonrpc":"2.0","id":{"n":1},"method":"GetTask","params":{"id":"x"}}', invalid('id must be a string, a whole number or null.')],
    ];
    for (const [raw, error] of cases) {
      const res = await post(x.key, y.username, raw);
      expect([raw, res.status, res.body]).toEqual([raw, 200, { jsonrpc: '2.0', id: null, error }]);
    }
    // Read before the version is asked for.
    const unversioned = await post(x.key, y.username, '{"jsonrpc":', {});
    expect(unversioned.body.error).toEqual(parse);
    // A method A2A 1.0 does not have (here, A2A 0.3's name) is not found, params or none.
    for (const raw of ['{"jsonrpc":"2.0","id":3,"method":"tasks/get"}', '{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"id":"x"}}']) {
      const res = await post(x.key, y.username, raw);
      expect([raw, res.body]).toEqual([raw, { jsonrpc: '2.0', id: 3, error: { code: -32601, message: 'Method not found: tasks/get is not a method of A2A 1.0.' } }]);
    }
  });

  test('a notification (no id) gets no reply: a send is carried out, a read is not', async () => {
    const x = await h.agent('note-sender');
    const y = await h.agent('note-recipient');
    const notify = (method: string, params: unknown) => post(x.key, y.username, JSON.stringify({ jsonrpc: '2.0', method, params }));
    const parts = (text: string) => [{ text }];

    for (const [method, text] of [['SendMessage', 'sent as a notification'], ['SendStreamingMessage', 'streamed as a notification']] as const) {
      const res = await notify(method, { message: { messageId: `note-${method}`, role: 'ROLE_USER', parts: parts(text) } });
      expect([method, res.status, res.body, res.headers.get('content-type')]).toEqual([method, 204, '', null]);
      const [sent] = await h.db.sql<{ n: number }[]>`select count(*)::int as n from messages where content = ${text}`;
      expect([method, sent!.n]).toEqual([method, 1]);
    }
    // A refusal is not told either.
    expect((await notify('SendMessage', { message: { messageId: 7, parts: parts('never') } })).status).toBe(204);
    expect(await messagesOf(x.username)).toBe(2);

    // Reading the answer would record a read nobody saw: a GetTask notification does nothing.
    const task = await send(await a2aClient(x, y.username), message('Answer me'));
    const answer = await h.post(y, task.contextId, 'Here is the answer.');
    const read = await notify('GetTask', { id: task.id });
    expect([read.status, read.body]).toEqual([204, '']);
    const [toX] = await h.db.sql`
      select d.step from deliveries d join agents a on a.id = d.recipient_id where d.message_id = ${answer.id} and a.username = ${x.username}`;
    expect(toX!.step).toBe('accepted');
  });

  test('params A2A does not allow are invalid params (-32602) naming the field, and send nothing', async () => {
    const x = await h.agent('params-sender');
    const y = await h.agent('params-recipient');
    const call = async (method: string, params: unknown) => {
      const res = await post(x.key, y.username, JSON.stringify({ jsonrpc: '2.0', id: 'p', method, params }));
      expect([method, res.status, res.body.id, res.body.error.code]).toEqual([method, 200, 'p', -32602]);
      return res.body.error.message as string;
    };
    const sending = (message: Record<string, unknown>) => ({ message: { messageId: 'params-1', role: 'ROLE_USER', parts: [{ text: 'hi' }], ...message } });
    const answers = [
      [sending({ parts: ['x'] }), 'message.parts[0] must be an object, such as {"text": "…"}.'],
      [sending({ parts: [null] }), 'message.parts[0] must be an object, such as {"text": "…"}.'],
      [sending({ parts: [{}] }), 'message.parts[0] must hold one of text, raw, url or data.'],
      [sending({ parts: [{ text: 5 }] }), 'message.parts[0].text must be a string.'],
      [sending({ parts: [{ text: 'a' }, { raw: 5 }] }), 'message.parts[1].raw must be a string.'],
      [sending({ parts: 'hi' }), 'message.parts must be a list.'],
      [sending({ messageId: 7 }), 'message.messageId must be a string.'],
      [{ message: { message_id: 7, parts: [{ text: 'hi' }] } }, 'message.message_id must be a string.'],
      [sending({ contextId: ['a'] }), 'message.contextId must be a string.'],
      [sending({ metadata: 'a summary' }), 'message.metadata must be an object.'],
      [{ ...sending({}), configuration: { historyLength: 1.5 } }, 'configuration.historyLength must be a whole number.'],
      [{ ...sending({}), configuration: { returnImmediately: 'yes' } }, 'configuration.returnImmediately must be true or false.'],
      [{ ...sending({}), configuration: { taskPushNotificationConfig: { url: 5 } } }, 'configuration.taskPushNotificationConfig.url must be a string.'],
      [{ message: 'hi' }, 'message must be an object.'],
      ['hi', 'params must be an object.'],
    ] as const;
    for (const [params, sentence] of answers) expect([params, await call('SendMessage', params)]).toEqual([params, sentence]);
    expect(await call('SendStreamingMessage', sending({ parts: ['x'] }))).toBe('message.parts[0] must be an object, such as {"text": "…"}.');
    expect(await messagesOf(x.username)).toBe(0);

    expect(await call('GetTask', { id: 5 })).toBe('id must be a string.');
    expect(await call('GetTask', { id: 'x', historyLength: '2' })).toBe('historyLength must be a whole number.');
    expect(await call('SubscribeToTask', { id: null })).toBe('id is required: the task to read.');
    expect(await call('CancelTask', { id: true })).toBe('id must be a string.');
    expect(await call('ListTasks', { contextId: 5 })).toBe('contextId must be a string.');
    expect(await call('CreateTaskPushNotificationConfig', { taskId: 'x', url: 'https://example.com', authentication: { scheme: 1 } })).toBe(
      'authentication.scheme must be a string.',
    );
    expect(await call('GetTaskPushNotificationConfig', { taskId: 5, id: 'c' })).toBe('taskId must be a string.');
  });

  test('whatever the params, a request is answered with a result or an error of A2A, never an internal one; a notification with nothing', async () => {
    const x = await h.agent('fuzz-a2a-sender');
    const y = await h.agent('fuzz-a2a-recipient');
    const methods = [
      'SendMessage',
      'SendStreamingMessage',
      'GetTask',
      'ListTasks',
      'CancelTask',
      'SubscribeToTask',
      'CreateTaskPushNotificationConfig',
      'GetTaskPushNotificationConfig',
      'ListTaskPushNotificationConfigs',
      'DeleteTaskPushNotificationConfig',
      'GetExtendedAgentCard',
      'NoSuchMethod',
    ];
    const values = [null, 'x', 5, -1.5, true, [], {}, [null], [{}], { '': 1 }, '\u0000', 'x'.repeat(5000), { __proto__: { polluted: 1 } }];
    const params = [
      undefined,
      ...values,
      ...values.map((v) => ({ id: v, taskId: v, url: v, token: v, contextId: v, pageSize: v, pageToken: v, status: v, historyLength: v })),
      ...values.map((v) => ({ message: { messageId: `fuzz-${JSON.stringify(v)}`, role: v, parts: [{ text: 'x', metadata: v, data: v }], metadata: v } })),
      ...values.map((v) => ({ message: { messageId: 'fuzz-parts', parts: v } })),
      ...values.map((v) => ({ message: { messageId: 'fuzz-config', parts: [{ text: 'x' }] }, configuration: { taskPushNotificationConfig: v, acceptedOutputModes: v } })),
      { message: { messageId: 'fuzz-raw', parts: [{ raw: '%%%not base64' }] } },
      { status: 'TASK_STATE_NONSENSE' },
      { message: { messageId: 'fuzz-role', role: 'ROLE_NOBODY', parts: [{ text: 'x' }] } },
    ];
    const headers = { authorization: `Bearer ${x.key}`, 'a2a-version': '1.0', 'content-type': 'application/json' };
    for (const method of methods) {
      for (const p of params) {
        const raw = JSON.stringify({ jsonrpc: '2.0', id: 1, method, ...(p === undefined ? {} : { params: p }) });
        const res = await h.app.handle(new Request(`http://localhost/a2a/agents/${y.username}`, { method: 'POST', headers, body: raw }));
        // A stream that opened is an answer too; it never ends by itself.
        if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
          await res.body?.cancel();
          continue;
        }
        const body = (await res.json()) as { result?: unknown; error?: { code: number } };
        const known = 'result' in body || [-32001, -32002, -32004, -32005, -32007, -32601, -32602].includes(body.error?.code ?? 0);
        expect([raw.slice(0, 200), res.status, known]).toEqual([raw.slice(0, 200), 200, true]);
        const notification = raw.replace('"id":1,', '');
        const unanswered = await h.app.handle(new Request(`http://localhost/a2a/agents/${y.username}`, { method: 'POST', headers, body: notification }));
        expect([notification.slice(0, 200), unanswered.status, await unanswered.text()]).toEqual([notification.slice(0, 200), 204, '']);
      }
    }
  }, 60_000);
});

describe('browsers', () => {
  test('may call: a preflight is answered for the headers A2A clients send, and every answer is readable from any origin', async () => {
    const x = await h.agent('cors-sender');
    const y = await h.agent('cors-recipient');
    const ask = { origin: 'https://agents.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,a2a-version' };
    for (const path of [`/a2a/agents/${y.username}`, `/a2a/agents/${y.username}/`, `/a2a/agents/${y.username}/.well-known/agent-card.json`, '/a2a/agents/no-such-agent']) {
      const res = await h.call('OPTIONS', path, { headers: ask });
      expect([path, res.status, res.body, ...['allow-origin', 'allow-methods', 'allow-headers'].map((h) => res.headers.get(`access-control-${h}`))]).toEqual([
        path,
        204,
        '',
        '*',
        'GET, POST',
        'Authorization, Content-Type, A2A-Version, A2A-Extensions, X-A2A-Extensions, X-Request-Id',
      ]);
      expect(res.headers.get('access-control-allow-credentials')).toBeNull();
    }
    const origin = { origin: 'https://agents.example', 'a2a-version': '1.0' };
    const answered = await h.call('POST', `/a2a/agents/${y.username}`, { key: x.key, headers: origin, body: { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: {} } });
    const refused = await h.call('POST', `/a2a/agents/${y.username}`, { headers: origin, body: { jsonrpc: '2.0', id: 1, method: 'ListTasks', params: {} } });
    const card = await h.call('GET', `/a2a/agents/${y.username}/.well-known/agent-card.json`, { key: x.key, headers: origin });
    for (const res of [answered, refused, card]) {
      expect([res.status, res.headers.get('access-control-allow-origin'), res.headers.get('access-control-expose-headers')]).toEqual([
        res.status,
        '*',
        'X-Request-Id, WWW-Authenticate, Retry-After',
      ]);
    }
    expect([answered.status, refused.status, card.status]).toEqual([200, 401, 200]);
    // Only A2A's paths: the dashboard, whose session is a cookie, still answers no preflight.
    const dashboard = await h.call('OPTIONS', '/dashboard/api/me', { headers: ask });
    expect([dashboard.status, dashboard.headers.get('access-control-allow-origin')]).toEqual([404, null]);
  });
});
