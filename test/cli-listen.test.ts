import { beforeAll, expect, test } from 'bun:test';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { track } from './support/children';
import { uniqueName, useHarness, useListening, type TestAgent } from './support/harness';
import { eventually } from './support/receiver';

// `ams listen` as a real process against a real listening server: what a job behind NAT or a
// coding agent's helper runs to hear its mail the moment it arrives.
const h = useHarness();
const server = useListening(h);
const main = join(import.meta.dir, '..', 'src/main.ts');
let sender: TestAgent;

beforeAll(async () => {
  sender = await h.agent(uniqueName('sender'));
});

// A listener, its stdout read line by line as it comes.
function listener(args: string[], key: string | undefined) {
  const child = track(
    Bun.spawn(['bun', main, 'listen', '--base-url', server.base, ...args], {
      env: { ...process.env, AMS_AGENT_KEY: key, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/unused' },
      stdout: 'pipe',
      stderr: 'pipe',
    }),
  );
  const lines: string[] = [];
  let partial = '';
  const reading = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stdout) {
      partial += decoder.decode(chunk, { stream: true });
      const parts = partial.split('\n');
      partial = parts.pop()!;
      lines.push(...parts);
    }
  })();
  let stderr = '';
  const readingErrors = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) stderr += decoder.decode(chunk, { stream: true });
  })();
  return {
    child,
    lines,
    stderr: () => stderr,
    async ended() {
      const code = await child.exited;
      await Promise.all([reading, readingErrors]);
      return { code, stderr };
    },
  };
}

async function recipientWithThread() {
  const agent = await h.agent(uniqueName('listener'));
  const threadId = await h.thread(sender, [agent], 'Heard at once');
  return { agent, threadId };
}

const listening = (n: number) => eventually(async () => h.inboxSignal.streaming() === n, 10_000);

test('one JSON line per event, in order, with the doorbell data; SIGTERM ends it with exit 0', async () => {
  const { agent, threadId } = await recipientWithThread();
  const run = listener([], agent.key);
  await listening(1);
  const first = await h.post(sender, threadId, 'first');
  const second = await h.post(sender, threadId, 'second');
  await eventually(async () => run.lines.length === 2, 10_000);
  const events = run.lines.map((l) => JSON.parse(l));
  expect(events.map((e) => [e.event, e.data.messageId, e.data.summary])).toEqual([
    ['message.created', first.id, 'first'],
    ['message.created', second.id, 'second'],
  ]);
  expect(Object.keys(events[0])).toEqual(['id', 'event', 'data']);
  expect(events[0].data).toMatchObject({ threadId, threadTitle: 'Heard at once', sender: sender.username });
  run.child.kill('SIGTERM');
  expect(await run.ended()).toEqual({ code: 0, stderr: '' });
  await listening(0);
});

test('--exec runs the command once per event with the event on stdin; --state-file resumes a restarted listener where it stopped', async () => {
  const { agent, threadId } = await recipientWithThread();
  const dir = await mkdtemp(join(tmpdir(), 'ams-listen-'));
  const state = join(dir, 'last-event');
  const handled = join(dir, 'handled.jsonl');
  const args = ['--exec', `cat >> '${handled}'`, '--state-file', state];
  const first = listener(args, agent.key);
  await listening(1);
  const posted = [(await h.post(sender, threadId, 'one')).id, (await h.post(sender, threadId, 'two')).id];
  await eventually(async () => (await readFile(handled, 'utf8').catch(() => '')).split('\n').length === 3, 10_000);
  first.child.kill('SIGINT');
  expect((await first.ended()).code).toBe(0);
  const kept = (await readFile(state, 'utf8')).trim();
  // While nobody listens, two more arrive; the restarted listener hands on those, and only those.
  posted.push((await h.post(sender, threadId, 'three')).id, (await h.post(sender, threadId, 'four')).id);
  const second = listener(args, agent.key);
  await eventually(async () => (await readFile(handled, 'utf8')).split('\n').length === 5, 10_000);
  second.child.kill('SIGTERM');
  expect(await second.ended()).toEqual({ code: 0, stderr: '' });
  const events = (await readFile(handled, 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
  expect(events.map((e) => e.data.messageId)).toEqual(posted);
  expect(events[1].id).toBe(kept);
  expect((await readFile(state, 'utf8')).trim()).toBe(events[3].id);
});

test('a dropped connection is retried with backoff and resumes by id: nothing lost, nothing twice', async () => {
  const { agent, threadId } = await recipientWithThread();
  const run = listener([], agent.key);
  await listening(1);
  const posted = [(await h.post(sender, threadId, 'before')).id];
  await eventually(async () => run.lines.length === 1, 10_000);
  // The server goes away with its connections; mail keeps coming in meanwhile.
  h.app.stop(true);
  await listening(0);
  posted.push((await h.post(sender, threadId, 'while away')).id, (await h.post(sender, threadId, 'also while away')).id);
  h.app.listen({ port: server.port, hostname: '127.0.0.1' });
  await eventually(async () => run.lines.length === 3, 20_000);
  posted.push((await h.post(sender, threadId, 'after')).id);
  await eventually(async () => run.lines.length === 4, 10_000);
  expect(run.lines.map((l) => JSON.parse(l).data.messageId)).toEqual(posted);
  run.child.kill('SIGTERM');
  const ended = await run.ended();
  expect(ended.code).toBe(0);
  expect(ended.stderr.startsWith(`The event stream at ${server.base} dropped (`)).toBe(true);
  expect(ended.stderr).toMatch(/^[^\n]+\); connecting again in 500 ms\.\n/);
});

test('a refused key is exit 1, events no longer kept are exit 3, each with the sentence on stderr', async () => {
  const wrong = listener([], `agt_${'k'.repeat(43)}`);
  expect(await wrong.ended()).toEqual({ code: 1, stderr: 'The API key is not recognised or its agent is archived.\n' });
  expect(wrong.lines).toEqual([]);
  const { agent } = await recipientWithThread();
  await h.db.sql`insert into agent_event_floors (agent_id, xid, seq) select id, '5', 1 from agents where username = ${agent.username}`;
  const dir = await mkdtemp(join(tmpdir(), 'ams-listen-'));
  await Bun.write(join(dir, 'state'), '4-1\n');
  const old = listener(['--state-file', join(dir, 'state')], agent.key);
  expect(await old.ended()).toEqual({
    code: 3,
    stderr:
      'Events after that id are no longer kept (a stream keeps 168 hours of events): open the stream without Last-Event-ID, then read your inbox (GET /api/deliveries).\n',
  });
  // The id is no use any more: the next start begins afresh instead of being refused again.
  expect(await readFile(join(dir, 'state'), 'utf8')).toBe('');
  const none = listener([], undefined);
  expect(await none.ended()).toEqual({ code: 1, stderr: 'Set AMS_AGENT_KEY to the agent key (agt_…).\n' });
});

test('an agent holding every stream it may is told why on stderr, and the listener connects once a place is free', async () => {
  const { agent, threadId } = await recipientWithThread();
  const held: Response[] = [];
  for (let i = 0; i < h.config.HELD_REQUESTS_PER_AGENT; i++) {
    held.push(await h.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${agent.key}` } })));
  }
  expect(held.filter((r) => r.status !== 200)).toEqual([]);
  const run = listener([], agent.key);
  const refused =
    `The event stream at ${server.base} dropped (This agent already holds 100 requests open on this server (streams and waiting requests together), the most one agent may: close one before opening another.); connecting again in 500 ms.\n`;
  await eventually(async () => run.stderr().startsWith(refused), 10_000);
  await held.pop()!.body!.cancel();
  await listening(h.config.HELD_REQUESTS_PER_AGENT);
  const { id } = await h.post(sender, threadId, 'there was room after all');
  await eventually(async () => run.lines.length === 1, 10_000);
  expect(JSON.parse(run.lines[0]!).data.messageId).toBe(id);
  run.child.kill('SIGTERM');
  expect((await run.ended()).code).toBe(0);
  for (const response of held) await response.body!.cancel();
});
