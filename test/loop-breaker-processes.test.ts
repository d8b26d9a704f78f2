import { afterAll, expect, test } from 'bun:test';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { track } from './support/children';
import { uniqueName, useHarness, useListening, type TestAgent } from './support/harness';
import { eventually } from './support/receiver';

// Two real agents that answer each other forever: each is an `ams listen --exec` process whose
// command replies to every message it hears. The loop breaker pauses their thread past its
// limit, and from then on what they post waits for a person, so the exchange stops.
const LIMIT = 6;
const h = useHarness({ LOOP_BREAKER_MESSAGES: String(LIMIT), LOOP_BREAKER_WINDOW_MINUTES: '10' });
const server = useListening(h);
const main = join(import.meta.dir, '..', 'src/main.ts');
const dir = await mkdtemp(join(tmpdir(), 'ams-loop-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

// The agent's command: one event as a JSON line on stdin; a new message is answered in its thread.
const replier = join(dir, 'reply.ts');
await writeFile(
  replier,
  `const event = JSON.parse(await Bun.stdin.text());
if (event.event === 'message.created') {
  const res = await fetch(process.env.LOOP_BASE + '/api/threads/' + event.data.threadId + '/messages', {
    method: 'POST',
    headers: { authorization: 'Bearer ' + process.env.AMS_AGENT_KEY, 'content-type': 'application/json' },
    body: JSON.stringify({ content: 're: ' + event.data.summary }),
  });
  if (res.status !== 201 && res.status !== 202) process.exit(1);
}
`,
);

const listen = (agent: TestAgent) =>
  track(
    Bun.spawn(['bun', main, 'listen', '--base-url', server.base, '--exec', `bun ${replier}`], {
      env: { ...process.env, AMS_AGENT_KEY: agent.key, LOOP_BASE: server.base, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/unused' },
      stdout: 'ignore',
      stderr: 'pipe',
    }),
  );

test('two agents answering each other are paused past the limit, and their next answers wait for a person', async () => {
  const ping = await h.agent(uniqueName('ping'));
  const pong = await h.agent(uniqueName('pong'));
  const threadId = await h.thread(ping, [pong], 'Ping pong');
  const runs = [listen(ping), listen(pong)];
  try {
    await eventually(async () => h.inboxSignal.streaming() === 2, 10_000);
    await h.post(ping, threadId, 'ping');
    const [paused] = await eventually(async () => {
      const rows = await h.db.sql`select paused_at from threads where id = ${threadId} and paused_at is not null`;
      return rows.length ? rows : null;
    }, 30_000);
    expect(paused!.paused_at).toBeInstanceOf(Date);
    // The answer to the last message that went through is held, with the loop as its reason.
    const held = await eventually(async () => {
      const rows = await h.db.sql<{ reason: string; sender: string }[]>`select reason, sender from held_messages where thread_id = ${threadId}`;
      return rows.length ? rows : null;
    }, 10_000);
    expect(held.map((r) => r.reason)).toEqual(['loop']);
    // Nothing moves any more: no delivery, so no one hears anything to answer.
    const sent = (await h.db.sql<{ n: number }[]>`select count(*)::int as n from messages where thread_id = ${threadId}`)[0]!.n;
    expect(sent).toBeGreaterThan(LIMIT);
    await Bun.sleep(1_000);
    const later = (await h.db.sql<{ n: number }[]>`select count(*)::int as n from messages where thread_id = ${threadId}`)[0]!.n;
    const waiting = (await h.db.sql<{ n: number }[]>`select count(*)::int as n from held_messages where thread_id = ${threadId}`)[0]!.n;
    expect([later, waiting]).toEqual([sent, 1]);
  } finally {
    for (const run of runs) run.kill('SIGTERM');
    await Promise.all(runs.map((r) => r.exited));
  }
});
