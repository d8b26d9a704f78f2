import { expect, test } from 'bun:test';
import { createHash, randomBytes } from 'node:crypto';
import { pruneHistory } from '../src/domain/messages/retention';
import { sweepFiles } from '../src/domain/files/files';
import { eventually } from './support/receiver';
import { eventReader } from './support/events';
import { approveHeld } from '../src/domain/messages/holds';
import { BY_CLI } from '../src/domain/people/audit';
import { silentLogger } from '../src/log';
import { uniqueName, useHarness, useListening, type TestAgent } from './support/harness';

// Files through the HTTP API: uploaded (streamed, chunked), attached, seen only by whom the rule
// says, served safely, refused whole when anything is wrong, and swept. A small maximum keeps the
// bytes few while still spanning several 256 KiB chunks.
const MAX = 600_000;
const QUOTA = 1_000_000;
const h = useHarness({ FILE_MAX_BYTES: String(MAX), FILE_QUOTA_BYTES: String(QUOTA), FILES_PER_MESSAGE: '3' });
const at = useListening(h);

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);

async function upload(agent: TestAgent, bytes: Uint8Array, { name = 'data.bin', type = 'application/octet-stream', headers = {} as Record<string, string> } = {}) {
  const response = await h.app.handle(
    new Request(`http://localhost/api/files?name=${encodeURIComponent(name)}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${agent.key}`, 'content-type': type, 'content-length': String(bytes.byteLength), ...headers },
      body: bytes,
    }),
  );
  return { status: response.status, body: (await response.json()) as any };
}

const stored = async (agent: TestAgent) => {
  const [row] = await h.db.sql`
    select (select count(*)::int from files f join agents a on a.id = f.uploader_id where a.username = ${agent.username}) as files,
           (select count(*)::int from file_chunks c join files f on f.id = c.file_id join agents a on a.id = f.uploader_id where a.username = ${agent.username}) as chunks,
           (select coalesce(sum(bytes), 0)::int from file_usage u join agents a on a.id = u.agent_id where a.username = ${agent.username}) as used`;
  return row;
};

const agents = (...names: string[]) => Promise.all(names.map((n) => h.agent(uniqueName(n)))) as Promise<[TestAgent, TestAgent, TestAgent]>;

const get = (agent: TestAgent, path: string, headers: Record<string, string> = {}) =>
  h.app.handle(new Request(`http://localhost${path}`, { headers: { authorization: `Bearer ${agent.key}`, ...headers } }));

test('an upload streams into chunks, answers its hash, and downloads whole or by range with the safe headers', async () => {
  const alice = await h.agent(uniqueName('alice'));
  const bytes = randomBytes(MAX);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const up = await upload(alice, bytes, { name: 'Résumé "final".bin' });
  expect(up.status).toBe(201);
  expect(up.body.data).toEqual({ id: expect.any(String), name: 'Résumé "final".bin', contentType: 'application/octet-stream', size: MAX, sha256 });
  expect(await stored(alice)).toEqual({ files: 1, chunks: 3, used: MAX });
  const id = up.body.data.id;

  expect((await h.call('GET', `/api/files/${id}`, { key: alice.key })).body).toEqual({ success: true, data: up.body.data });
  const whole = await get(alice, `/api/files/${id}/content`);
  expect(whole.status).toBe(200);
  expect(Object.fromEntries(['content-type', 'content-disposition', 'x-content-type-options', 'content-security-policy', 'content-length', 'etag', 'accept-ranges'].map((k) => [k, whole.headers.get(k)]))).toEqual({
    'content-type': 'application/octet-stream',
    'content-disposition': `attachment; filename="R_sum_ _final_.bin"; filename*=UTF-8''R%C3%A9sum%C3%A9%20%22final%22.bin`,
    'x-content-type-options': 'nosniff',
    'content-security-policy': "default-src 'none'; sandbox",
    'content-length': String(MAX),
    etag: `"${sha256}"`,
    'accept-ranges': 'bytes',
  });
  expect(Buffer.from(await whole.arrayBuffer()).equals(bytes)).toBe(true);

  // A range across a chunk boundary, a suffix, and one past the end.
  const across = await get(alice, `/api/files/${id}/content`, { range: 'bytes=262000-262299' });
  expect([across.status, across.headers.get('content-range'), across.headers.get('content-length')]).toEqual([206, `bytes 262000-262299/${MAX}`, '300']);
  expect(Buffer.from(await across.arrayBuffer()).equals(bytes.subarray(262000, 262300))).toBe(true);
  const tail = await get(alice, `/api/files/${id}/content`, { range: 'bytes=-10' });
  expect(Buffer.from(await tail.arrayBuffer()).equals(bytes.subarray(MAX - 10))).toBe(true);
  const past = await get(alice, `/api/files/${id}/content`, { range: `bytes=${MAX}-` });
  expect([past.status, past.headers.get('content-range')]).toEqual([416, `bytes */${MAX}`]);
});

test('a file is seen by its uploader until attached, then by exactly the threads that carry it; a stranger gets 404', async () => {
  const [alice, bob, carol] = await agents('alice', 'bob', 'carol');
  const file = (await upload(alice, Buffer.from('a,b\n1,2\n'), { name: 'table.csv', type: 'text/csv' })).body.data;
  const noSuchFile = {
    success: false,
    error: 'No such file, or you cannot see it: a file is seen by its uploader until a message carries it, then by the participants of the threads its messages are in.',
  };
  for (const path of [`/api/files/${file.id}`, `/api/files/${file.id}/content`, '/api/files/not-an-id']) {
    expect(await h.call('GET', path, { key: bob.key })).toMatchObject({ status: 404, body: noSuchFile });
  }
  // Nobody attaches what they cannot see.
  const bobs = await h.thread(bob, [carol]);
  const refused = await h.call('POST', `/api/threads/${bobs}/messages`, { key: bob.key, body: { content: 'mine now', files: [file.id] } });
  expect(refused).toMatchObject({ status: 404, body: { success: false, error: `${noSuchFile.error} (${file.id})` } });
  expect(await h.db.sql`select 1 from messages where thread_id = ${bobs}`).toHaveLength(0);

  const threadId = await h.thread(alice, [bob]);
  const posted = await h.call('POST', `/api/threads/${threadId}/messages`, { key: alice.key, body: { content: 'the table', files: [file.id] } });
  expect(posted.status).toBe(201);
  const inbox = await h.call('GET', '/api/deliveries', { key: bob.key });
  expect(inbox.body.data.map((e: any) => e.files)).toEqual([[file]]);
  const read = await h.call('GET', `/api/threads/${threadId}/messages`, { key: bob.key });
  expect(read.body.data.map((m: any) => [m.content, m.files])).toEqual([['the table', [file]]]);
  expect(await (await get(bob, `/api/files/${file.id}/content`)).text()).toBe('a,b\n1,2\n');
  expect((await h.call('GET', `/api/files/${file.id}`, { key: carol.key })).status).toBe(404);

  // Bob passes it on to carol in a thread of theirs: she sees it from then on.
  expect((await h.call('POST', `/api/threads/${bobs}/messages`, { key: bob.key, body: { content: 'from alice', files: [file.id] } })).status).toBe(201);
  expect((await h.call('GET', `/api/files/${file.id}`, { key: carol.key })).status).toBe(200);
  // Removed from the thread (a closed thread): the file goes out of sight with it.
  await h.db.sql`update threads set state = 'closed' where id = ${bobs}`;
  expect((await h.call('GET', `/api/files/${file.id}`, { key: carol.key })).status).toBe(404);
});

test('a post names at most FILES_PER_MESSAGE files, each once', async () => {
  const [alice, bob] = await agents('alice', 'bob');
  const threadId = await h.thread(alice, [bob]);
  const ids = [];
  for (let i = 0; i < 4; i++) ids.push((await upload(alice, Buffer.from(`file ${i}`), { name: `f${i}.txt`, type: 'text/plain' })).body.data.id);
  const post = (files: string[]) => h.call('POST', `/api/threads/${threadId}/messages`, { key: alice.key, body: { content: 'files', files } });
  expect((await post(ids)).body).toEqual({ success: false, error: 'files must have at most 3 items (FILES_PER_MESSAGE)' });
  expect((await post([ids[0]!, ids[0]!])).body).toEqual({ success: false, error: 'files names a file twice; name each once' });
  expect(await h.db.sql`select 1 from messages where thread_id = ${threadId}`).toHaveLength(0);
  expect((await post(ids.slice(0, 3))).status).toBe(201);
  const [message] = (await h.call('GET', `/api/threads/${threadId}/messages`, { key: bob.key })).body.data;
  expect(message.files.map((f: any) => f.name)).toEqual(['f0.txt', 'f1.txt', 'f2.txt']);
});

test('bad uploads are refused with a sentence and leave nothing behind', async () => {
  const mallory = await h.agent(uniqueName('mallory'));
  const refusals = [
    [await upload(mallory, new Uint8Array(0)), 400, 'The file is empty (0 bytes); send its bytes as the request body. Nothing was stored.'],
    [await upload(mallory, randomBytes(MAX + 1)), 413, `The file is larger than the limit of ${MAX} bytes (FILE_MAX_BYTES); nothing was stored.`],
    // One byte over without a declared length: cut off while streaming, after chunks were written.
    [await upload(mallory, randomBytes(MAX + 1), { headers: { 'content-length': '' } }), 413, `The file is larger than the limit of ${MAX} bytes (FILE_MAX_BYTES); nothing was stored.`],
    [await upload(mallory, Buffer.from('abc'), { headers: { 'content-length': '4' } }), 400, 'The body was 3 bytes but Content-Length said 4: the upload was cut short or mislabelled, and nothing was stored.'],
    [await upload(mallory, Buffer.from('<script>alert(1)</script>'), { type: 'image/png' }), 400, 'The bytes are not image/png: its content does not start as a image/png file does. Declare the type the file really has; nothing was stored.'],
    [await upload(mallory, PNG, { name: '../../etc/passwd' }), 400, 'name must be a file name without / or \\ (no folders): send report.pdf, not docs/report.pdf'],
    [await upload(mallory, PNG, { name: 'a\\b.png' }), 400, 'name must be a file name without / or \\ (no folders): send report.pdf, not docs/report.pdf'],
    [await upload(mallory, PNG, { name: 'line\nbreak.png' }), 400, 'name must not contain control characters or line breaks'],
    [await upload(mallory, PNG, { name: '' }), 400, "name is required: the file's name, such as report.pdf (?name=report.pdf)"],
    [await upload(mallory, PNG, { type: 'application/x-www-form-urlencoded' }), 400, "Content-Type application/x-www-form-urlencoded is a form's encoding, not a file's type: send the file's own type (such as text/csv), or application/octet-stream; nothing was stored."],
  ] as const;
  expect(refusals.map(([reply, status, error]) => [reply.status, reply.body])).toEqual(refusals.map(([, status, error]) => [status, { success: false, error }]));
  expect(await stored(mallory)).toEqual({ files: 0, chunks: 0, used: 0 });
  // A PNG that is one is taken.
  expect((await upload(mallory, PNG, { name: 'dot.png', type: 'image/png' })).status).toBe(201);
});

test('past the storage quota an upload is 413 with how much is used, and nothing is kept', async () => {
  const hoarder = await h.agent(uniqueName('hoarder'));
  expect((await upload(hoarder, randomBytes(MAX))).status).toBe(201);
  const sentence = `Your files would take more than your storage quota of ${QUOTA} bytes (${MAX} are in use): nothing was stored. Files are freed when the messages carrying them are deleted, or after a while when no message carries them; or ask a person to raise FILE_QUOTA_BYTES.`;
  expect(await upload(hoarder, randomBytes(QUOTA - MAX + 1))).toEqual({ status: 413, body: { success: false, error: sentence } });
  expect(await upload(hoarder, randomBytes(QUOTA - MAX + 1), { headers: { 'content-length': '' } })).toEqual({ status: 413, body: { success: false, error: sentence } });
  expect(await stored(hoarder)).toEqual({ files: 1, chunks: 3, used: MAX });
  // Two at once that together pass it: one is stored, the other refused by the database.
  await h.db.sql`delete from files where uploader_id = (select id from agents where username = ${hoarder.username})`;
  const both = await Promise.all([upload(hoarder, randomBytes(MAX)), upload(hoarder, randomBytes(MAX))]);
  expect(both.map((r) => r.status).sort()).toEqual([201, 413]);
  expect(await stored(hoarder)).toEqual({ files: 1, chunks: 3, used: MAX });
});

test('an upload cut off by its client leaves nothing behind', async () => {
  const quitter = await h.agent(uniqueName('quitter'));
  const socket = await Bun.connect({ hostname: '127.0.0.1', port: at.port, socket: { data() {} } });
  socket.write(
    `POST /api/files?name=half.bin HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${quitter.key}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${MAX}\r\n\r\n`,
  );
  socket.write(randomBytes(300_000));
  // The first chunk is written pending; then the client goes.
  await eventually(async () => (await stored(quitter))!.chunks >= 1 || null);
  socket.end();
  await eventually(async () => (await stored(quitter))!.files === 0 || null);
  expect(await stored(quitter)).toEqual({ files: 0, chunks: 0, used: 0 });
});

test('files go with the last message carrying them, and unattached ones after FILE_UNATTACHED_HOURS', async () => {
  const [alice, bob] = await agents('alice', 'bob');
  const threadId = await h.thread(alice, [bob]);
  const kept = (await upload(alice, Buffer.from('kept'), { name: 'kept.txt' })).body.data.id;
  const attached = (await upload(alice, Buffer.from('attached'), { name: 'attached.txt' })).body.data.id;
  const forgotten = (await upload(alice, Buffer.from('forgotten'), { name: 'forgotten.txt' })).body.data.id;
  const old = await h.call('POST', `/api/threads/${threadId}/messages`, { key: alice.key, body: { content: 'old', files: [attached] } });
  await h.db.sql`update messages set created_at = now() - interval '400 days' where id = ${old.body.data.id}`;
  await h.db.sql`update files set created_at = now() - interval '25 hours' where id = ${forgotten}`;
  const before = (await stored(alice))!.used;

  await pruneHistory(h.db.sql, { attemptLogDays: 30, deadJobDays: 7, messageDays: 365, eventHours: 168, auditDays: 365 });
  expect(await sweepFiles(h.db.sql, 24)).toBe(2);
  const left = await h.db.sql`select id from files where id in (${kept}, ${attached}, ${forgotten})`;
  expect(left.map((f) => f.id)).toEqual([kept]);
  expect(await h.db.sql`select 1 from file_chunks where file_id in (${attached}, ${forgotten})`).toHaveLength(0);
  expect((await stored(alice))!.used).toBe(before - 'attached'.length - 'forgotten'.length);
});

test('the doorbell and the event stream say how many files a message carries, and only then', async () => {
  const sender = await h.agent(uniqueName('sender'));
  const hooked = await h.agent(uniqueName('hooked'), { webhookUrl: 'http://127.0.0.1:9/hook' });
  const threadId = await h.thread(sender, [hooked]);
  const leaving = new AbortController();
  const stream = await h.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${hooked.key}` }, signal: leaving.signal }));
  const next = eventReader(stream.body!);
  const ids = [(await upload(sender, Buffer.from('one'))).body.data.id, (await upload(sender, Buffer.from('two'))).body.data.id];
  const withFiles = await h.call('POST', `/api/threads/${threadId}/messages`, { key: sender.key, body: { content: 'two files', files: ids } });
  const plain = await h.post(sender, threadId, 'no files');
  const events = [await next(), await next()];
  expect(events.map((e) => [e.data.messageId, e.data.files])).toEqual([
    [withFiles.body.data.id, 2],
    [plain.id, undefined],
  ]);
  leaving.abort();
  const jobs = await h.db.sql`
    select j.payload -> 'doorbell' ->> 'files' as files from graphile_worker._private_jobs j join deliveries d on j.key = 'notify:' || d.id
    where d.message_id in (${withFiles.body.data.id}, ${plain.id}) order by d.message_id`;
  expect(jobs.map((j) => j.files)).toEqual(['2', '0']);
});

test('a held message carries its files once a person approves it, and not before', async () => {
  const [alice, bob] = await agents('alice', 'bob');
  const threadId = await h.thread(alice, [bob]);
  const file = (await upload(alice, Buffer.from('for approval'), { name: 'draft.txt' })).body.data;
  await h.db.sql`update agents set holds_messages = true where username = ${alice.username}`;
  const held = await h.call('POST', `/api/threads/${threadId}/messages`, { key: alice.key, body: { content: 'the draft', files: [file.id] } });
  expect(held.status).toBe(202);
  expect((await h.call('GET', `/api/files/${file.id}`, { key: bob.key })).status).toBe(404);
  expect((await h.call('GET', `/api/files/${file.id}`, { key: alice.key })).status).toBe(200);
  // Waiting longer than FILE_UNATTACHED_HOURS, it is not swept: its message will carry it.
  await h.db.sql`update files set created_at = now() - interval '25 hours' where id = ${file.id}`;
  await sweepFiles(h.db.sql, 24);
  expect(await approveHeld(h.db.sql, silentLogger, BY_CLI, [held.body.data.id])).toMatchObject({ approved: [held.body.data.id] });
  const [message] = (await h.call('GET', `/api/threads/${threadId}/messages`, { key: bob.key })).body.data;
  expect(message.files).toEqual([file]);
  expect((await h.call('GET', `/api/files/${file.id}`, { key: bob.key })).status).toBe(200);
});
