import { expect, test } from 'bun:test';
import { GetTaskRequest, ListTasksRequest, SendMessageRequest, SubscribeToTaskRequest, TaskState, type Part, type Task } from '@a2a-js/sdk';
import { a2aClient, listening } from './support/a2a-client';
import { uniqueName, useHarness, type TestAgent } from './support/harness';

// File parts over A2A, with the official SDK's client over real HTTP: sent by address and by bytes,
// carried as the message's files, and handed back in the task's messages, the answer's too: small
// ones as their bytes, larger ones by address.
const h = useHarness({ A2A_SEND_WAIT_MS: '0' });
const server = listening(h);

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);

async function upload(agent: TestAgent, text: string, name: string) {
  const response = await fetch(`${server.base()}/api/files?name=${name}`, { method: 'POST', headers: { authorization: `Bearer ${agent.key}`, 'content-type': 'text/plain' }, body: text });
  return ((await response.json()) as any).data;
}

const download = async (agent: TestAgent, url: string) => Buffer.from(await (await fetch(url, { headers: { authorization: `Bearer ${agent.key}` } })).arrayBuffer());

const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected a refusal');
    },
    (error: Error & { reason?: string }) => [error.reason, error.message],
  );

const address = (id: string) => `${server.base()}/api/files/${id}/content`;
const bytesOf = (part: Part) => (part.content?.$case === 'raw' ? part.content.value.toString() : null);

test('file parts by url and by raw bytes become the message files; the task hands them, and the answer’s, back as bytes', async () => {
  const [x, y] = [await h.agent(uniqueName('x')), await h.agent(uniqueName('y'))];
  const notes = await upload(x, 'see the figure', 'notes.txt');
  const client = await a2aClient(server.base(), x, y.username);
  const sent = (await client.sendMessage(
    SendMessageRequest.fromJSON({
      message: {
        messageId: 'with-files',
        role: 'ROLE_USER',
        parts: [
          { text: 'Two files' },
          { url: `${server.base()}/api/files/${notes.id}/content`, filename: 'notes.txt', mediaType: 'text/plain' },
          { raw: PNG.toString('base64'), filename: 'figure.png', mediaType: 'image/png' },
        ],
      },
    }),
  )) as Task;
  const [asked] = sent.history;
  const fileParts = asked!.parts.slice(1);
  expect(asked!.parts[0]!.content).toEqual({ $case: 'text', value: 'Two files' });
  expect(fileParts.map((p) => [p.filename, p.mediaType, p.metadata?.size])).toEqual([
    ['notes.txt', 'text/plain', 14],
    ['figure.png', 'image/png', PNG.length],
  ]);
  const [, figureUrl] = fileParts.map((p) => p.metadata?.url as string);
  expect(fileParts[0]!.content).toEqual({ $case: 'raw', value: Buffer.from('see the figure') });
  expect(fileParts[0]!.metadata).toEqual({ fileId: notes.id, size: 14, sha256: notes.sha256, url: address(notes.id) });
  expect(fileParts[1]!.content).toEqual({ $case: 'raw', value: PNG });
  // The recipient reads the same files over HTTP.
  const [message] = (await h.call('GET', `/api/threads/${sent.contextId}/messages`, { key: y.key })).body.data;
  expect(message.files.map((f: any) => f.name)).toEqual(['notes.txt', 'figure.png']);
  expect((await download(y, figureUrl!)).equals(PNG)).toBe(true);

  // The answer carries a file too: the task's status message hands it over.
  const answerFile = await upload(y, 'the review', 'review.txt');
  await h.call('POST', `/api/threads/${sent.contextId}/messages`, { key: y.key, body: { content: 'Reviewed', files: [answerFile.id] } });
  const done = await client.getTask(GetTaskRequest.fromJSON({ id: sent.id }));
  const [, answerPart] = done.status!.message!.parts;
  expect(answerPart!.content).toEqual({ $case: 'raw', value: Buffer.from('the review') });
  expect(answerPart!.metadata).toEqual({ fileId: answerFile.id, size: 10, sha256: answerFile.sha256, url: address(answerFile.id) });
  expect((await download(x, `${server.base()}/api/files/${answerFile.id}/content`)).toString()).toBe('the review');

  // The same message again is the same request: nothing new is posted.
  const again = (await client.sendMessage(
    SendMessageRequest.fromJSON({
      message: {
        messageId: 'with-files',
        role: 'ROLE_USER',
        parts: [
          { text: 'Two files' },
          { url: `${server.base()}/api/files/${notes.id}/content` },
          { raw: PNG.toString('base64'), filename: 'figure.png', mediaType: 'image/png' },
        ],
      },
    }),
  )) as Task;
  expect(again.id).toBe(sent.id);
});

test('a url part must name a file here the caller sees, and raw bytes are bounded; nothing is sent otherwise', async () => {
  const [x, y, z] = [await h.agent(uniqueName('x')), await h.agent(uniqueName('y')), await h.agent(uniqueName('z'))];
  const theirs = await upload(z, 'private', 'private.txt');
  const client = await a2aClient(server.base(), x, y.username);
  const send = (messageId: string, part: Record<string, unknown>) =>
    client.sendMessage(SendMessageRequest.fromJSON({ message: { messageId, role: 'ROLE_USER', parts: [{ text: 'file' }, part] } }));
  expect(await refusal(send('elsewhere', { url: 'https://files.example.com/report.pdf' }))).toEqual([
    'CONTENT_TYPE_NOT_SUPPORTED',
    `A url part must name a file uploaded here (${server.base()}/api/files/<id>/content, or ams://files/<id>); upload it with POST ${server.base()}/api/files first, or send its bytes as a raw part.`,
  ]);
  expect(await refusal(send('not-mine', { url: `ams://files/${theirs.id}` }))).toEqual([
    'TASK_NOT_FOUND',
    `No such file, or you cannot see it: a file is seen by its uploader until a message carries it, then by the participants of the threads its messages are in. (${theirs.id})`,
  ]);
  expect(await refusal(send('too-big', { raw: Buffer.alloc(256 * 1024 + 1).toString('base64'), filename: 'big.bin' }))).toEqual([
    'INVALID_PARAMS',
    `A raw file part may hold at most 262144 bytes; upload a larger file with POST ${server.base()}/api/files and send its address as a url part.`,
  ]);
  expect(await refusal(send('lying', { raw: Buffer.from('not a png').toString('base64'), filename: 'x.png', mediaType: 'image/png' }))).toEqual([
    'INVALID_PARAMS',
    'The bytes are not image/png: its content does not start as a image/png file does. Declare the type the file really has; nothing was stored.',
  ]);
  expect(await h.db.sql`select 1 from messages m join agents a on a.id = m.sender_agent_id where a.username = ${x.username}`).toHaveLength(0);
  expect(await h.db.sql`select 1 from files f join agents a on a.id = f.uploader_id where a.username = ${x.username}`).toHaveLength(0);
});

test('a file up to 64 KiB comes back as bytes equal to the upload, a larger one by address; lists and strangers get no bytes', async () => {
  const [x, y, z] = [await h.agent(uniqueName('x')), await h.agent(uniqueName('y')), await h.agent(uniqueName('z'))];
  const [small, large] = [await upload(x, 'a'.repeat(64 * 1024), 'small.txt'), await upload(x, 'b'.repeat(64 * 1024 + 1), 'large.txt')];
  const client = await a2aClient(server.base(), x, y.username);
  const sent = (await client.sendMessage(
    SendMessageRequest.fromJSON({
      message: { messageId: 'sizes', role: 'ROLE_USER', parts: [{ text: 'Two sizes' }, { url: `ams://files/${small.id}` }, { url: `ams://files/${large.id}` }] },
    }),
  )) as Task;
  const [, smallPart, largePart] = sent.history[0]!.parts;
  expect(bytesOf(smallPart!)).toBe('a'.repeat(64 * 1024));
  expect(smallPart!.metadata).toEqual({ fileId: small.id, size: 64 * 1024, sha256: small.sha256, url: address(small.id) });
  expect(largePart!.content).toEqual({ $case: 'url', value: address(large.id) });
  expect(largePart!.metadata).toEqual({ fileId: large.id, size: 64 * 1024 + 1, sha256: large.sha256 });
  expect((await download(x, address(large.id))).toString()).toBe('b'.repeat(64 * 1024 + 1));

  // A list of tasks names every file by address.
  const listed = await client.listTasks(ListTasksRequest.fromJSON({ historyLength: 1 }));
  expect(listed.tasks[0]!.history[0]!.parts.slice(1).map((p) => p.content?.$case)).toEqual(['url', 'url']);

  // A stranger has no such task, and the address refuses it.
  const stranger = await a2aClient(server.base(), z, y.username);
  expect(await refusal(stranger.getTask(GetTaskRequest.fromJSON({ id: sent.id })))).toEqual(['TASK_NOT_FOUND', `No task ${sent.id} of yours with this agent.`]);
  expect((await fetch(address(small.id), { headers: { authorization: `Bearer ${z.key}` } })).status).toBe(404);

  // A stream's status update hands the answer's small file over too.
  const events = client.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: sent.id }));
  expect((await events.next()).value?.payload?.$case).toBe('task');
  const answerFile = await upload(y, 'answered', 'answer.txt');
  await h.call('POST', `/api/threads/${sent.contextId}/messages`, { key: y.key, body: { content: 'Done', files: [answerFile.id] } });
  let update = (await events.next()).value?.payload;
  while (update?.$case === 'statusUpdate' && update.value.status?.state !== TaskState.TASK_STATE_COMPLETED) update = (await events.next()).value?.payload;
  expect(update?.$case).toBe('statusUpdate');
  const answered = update?.$case === 'statusUpdate' ? update.value.status!.message!.parts[1]! : null;
  expect(bytesOf(answered!)).toBe('answered');
  await events.return(undefined);
});
