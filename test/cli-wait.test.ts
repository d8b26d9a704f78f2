import { beforeAll, expect, test } from 'bun:test';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uniqueName, useHarness, useListening, type TestAgent } from './support/harness';
import { freePort } from './support/ports';
import { eventually } from './support/receiver';

// `ams wait` as a real process against a real listening server: what a coding agent's hook or a
// shell loop runs.
const h = useHarness();
const server = useListening(h);
const main = join(import.meta.dir, '..', 'src/main.ts');
let sender: TestAgent;

beforeAll(async () => {
  sender = await h.agent(uniqueName('sender'));
});

async function wait(args: string[], key: string | undefined) {
  const child = Bun.spawn(['bun', main, 'wait', '--base-url', server.base, ...args], {
    env: { ...process.env, AMS_AGENT_KEY: key, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/unused' },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { stdout, stderr, code };
}

async function recipientWithThread() {
  const agent = await h.agent(uniqueName('local'));
  const threadId = await h.thread(sender, [agent], 'Local work');
  return { agent, threadId };
}

test('mail already waiting is printed as JSON at once, exit 0', async () => {
  const { agent, threadId } = await recipientWithThread();
  const posted = await h.post(sender, threadId, 'check the build');
  const run = await wait([], agent.key);
  expect([run.code, run.stderr]).toEqual([0, '']);
  const entries = JSON.parse(run.stdout);
  expect(entries).toHaveLength(1);
  expect(entries[0]).toMatchObject({ messageId: posted.id, threadId, sender: sender.username, summary: 'check the build' });
});

test('an empty inbox until the timeout: nothing printed, exit 2', async () => {
  const { agent } = await recipientWithThread();
  const run = await wait(['--timeout', '1'], agent.key);
  expect(run).toEqual({ stdout: '', stderr: '', code: 2 });
});

test('SIGTERM or SIGINT ends a wait at once, as its timeout would: nothing printed, exit 2, the held request let go', async () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    const { agent } = await recipientWithThread();
    const child = Bun.spawn(['bun', main, 'wait', '--base-url', server.base, '--timeout', '60'], {
      env: { ...process.env, AMS_AGENT_KEY: agent.key, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/unused' },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    await eventually(async () => h.inboxSignal.waiting() === 1 || null);
    const sent = performance.now();
    child.kill(signal);
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    expect([signal, code, stdout, stderr]).toEqual([signal, 2, '', '']);
    // Long before the 60 s it would otherwise hold.
    expect(performance.now() - sent).toBeLessThan(10_000);
    await eventually(async () => h.inboxSignal.waiting() === 0 || null);
  }
});

test('it blocks until mail arrives, and with --since-file never prints the same entry twice', async () => {
  const { agent, threadId } = await recipientWithThread();
  const since = join(await mkdtemp(join(tmpdir(), 'ams-wait-')), 'seen');
  const first = await h.post(sender, threadId, 'first');
  const printed = await wait(['--since-file', since, '--format', 'text'], agent.key);
  expect([printed.code, printed.stdout]).toEqual([0, `[Local work] ${sender.username}: first (message ${first.id})\n`]);
  const inbox = await h.call('GET', '/api/deliveries', { key: agent.key });
  expect((await readFile(since, 'utf8')).trim()).toBe(inbox.body.data[0].deliveryId);
  // The first entry is still unacknowledged: a second run waits past it instead of printing it again.
  expect(await wait(['--since-file', since, '--timeout', '1'], agent.key)).toEqual({ stdout: '', stderr: '', code: 2 });
  const blocked = wait(['--since-file', since, '--timeout', '30'], agent.key);
  await eventually(async () => h.inboxSignal.waiting() === 1, 10_000);
  const second = await h.post(sender, threadId, 'second');
  const woken = await blocked;
  expect(woken.code).toBe(0);
  expect(JSON.parse(woken.stdout).map((e: { messageId: string }) => e.messageId)).toEqual([second.id]);
});

test('a wrong key or none is exit 1 with a sentence on stderr', async () => {
  const wrong = await wait(['--timeout', '1'], `agt_${'k'.repeat(43)}`);
  expect(wrong).toEqual({ stdout: '', stderr: 'The API key is not recognised or its agent is archived.\n', code: 1 });
  const none = await wait(['--timeout', '1'], undefined);
  expect(none).toEqual({ stdout: '', stderr: 'Set AMS_AGENT_KEY to the agent key (agt_…).\n', code: 1 });
  const bad = await wait(['--format', 'yaml'], 'agt_x');
  expect([bad.code, bad.stderr]).toEqual([1, '--format must be json or text\n']);
  // Nothing at the address: the sentence names it, and where it came from.
  const away = `http://127.0.0.1:${await freePort()}`;
  const unreachable = await wait(['--timeout', '1', '--base-url', away], 'agt_x');
  expect([unreachable.code, unreachable.stdout]).toEqual([1, '']);
  expect(unreachable.stderr).toStartWith(`Could not reach the service at ${away} (the address is --base-url, else AMS_URL, else PUBLIC_URL, else PORT on this machine): `);
});

test('the example hook prints new mail as text and exits 0 either way', async () => {
  const { agent, threadId } = await recipientWithThread();
  const dir = await mkdtemp(join(tmpdir(), 'ams-hook-'));
  const hook = async () => {
    const child = Bun.spawn([join(import.meta.dir, '..', 'examples/hooks/check-mail.sh'), '1'], {
      cwd: dir,
      env: { ...process.env, AMS: `bun ${main}`, AMS_URL: server.base, AMS_AGENT_KEY: agent.key, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/unused' },
      stdout: 'pipe',
      stderr: 'pipe',
    });
    const [stdout, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
    return { stdout, code };
  };
  expect(await hook()).toEqual({ stdout: '', code: 0 });
  const posted = await h.post(sender, threadId, 'review please');
  expect(await hook()).toEqual({ stdout: `[Local work] ${sender.username}: review please (message ${posted.id})\n`, code: 0 });
  expect(await hook()).toEqual({ stdout: '', code: 0 });
});
