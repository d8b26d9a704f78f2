import { afterAll, beforeAll, expect, test } from 'bun:test';
import { AGENTS_CHANNEL } from '../src/db/agent-cache';
import { connect, type Sql } from '../src/db/connect';
import { EVENTS_CHANNEL, INBOX_CHANNEL, listenForInbox, type InboxListener } from '../src/db/inbox-signal';
import { silentLogger } from '../src/log';
import { useHarness } from './support/harness';
import { eventually } from './support/receiver';

// A key's waiters are kept alone while there is one and in a set once there are more: whichever
// way they come and go, each is woken while it waits and never after.
const h = useHarness();
let sql: Sql;
let signal: InboxListener;
beforeAll(async () => {
  sql = connect(h.db.url, 2);
  signal = listenForInbox(sql, silentLogger);
  await signal.start();
});
afterAll(async () => {
  await signal.stop();
  await sql.end({ timeout: 1 });
});

const woken: string[] = [];
const waiter = (name: string) => () => void woken.push(name);
// Notifications arrive in the order they were sent: once the marker's has, every one before it has.
async function notifyAll(channel: string, ...keys: string[]) {
  const marker = crypto.randomUUID();
  const unmark = signal.subscribe(marker, waiter('marker'))!;
  for (const key of keys) await h.db.sql`select pg_notify(${channel}, ${key})`;
  await h.db.sql`select pg_notify(${INBOX_CHANNEL}, ${marker})`;
  await eventually(async () => woken.includes('marker') || null);
  unmark();
  const seen = woken.filter((name) => name !== 'marker');
  woken.length = 0;
  return seen.sort();
}

test('one waiter, then two, then one again, then none: each woken exactly while it waits', async () => {
  const agent = crypto.randomUUID();
  const offA = signal.subscribe(agent, waiter('a'))!;
  expect(signal.waiting()).toBe(1);
  expect(await notifyAll(INBOX_CHANNEL, agent)).toEqual(['a']);

  const offB = signal.subscribe(agent, waiter('b'))!;
  expect(signal.waiting()).toBe(2);
  expect(await notifyAll(INBOX_CHANNEL, agent)).toEqual(['a', 'b']);

  offA();
  expect(signal.waiting()).toBe(1);
  expect(await notifyAll(INBOX_CHANNEL, agent)).toEqual(['b']);
  // Taken off twice, a waiter is taken off once: the other stays.
  offA();
  expect(signal.waiting()).toBe(1);

  offB();
  expect(signal.waiting()).toBe(0);
  expect(await notifyAll(INBOX_CHANNEL, agent)).toEqual([]);
});

test('the same waiter twice on one key is woken once, and gone after one removal', async () => {
  const agent = crypto.randomUUID();
  const same = waiter('same');
  const first = signal.subscribe(agent, same)!;
  const second = signal.subscribe(agent, same)!;
  expect(signal.waiting()).toBe(1);
  expect(await notifyAll(INBOX_CHANNEL, agent)).toEqual(['same']);
  first();
  expect(signal.waiting()).toBe(0);
  second();
  expect(await notifyAll(INBOX_CHANNEL, agent)).toEqual([]);
});

test('a waiter that leaves while being woken, and one that arrives then, are each woken only while they wait', async () => {
  const agent = crypto.randomUUID();
  let offLate: (() => void) | null = null;
  const offFirst = signal.subscribe(agent, () => {
    woken.push('first');
    offFirst();
    offLate ??= signal.subscribe(agent, waiter('late'))!;
  })!;
  expect(await notifyAll(INBOX_CHANNEL, agent)).toEqual(['first']);
  expect(signal.waiting()).toBe(1);
  expect(await notifyAll(INBOX_CHANNEL, agent)).toEqual(['late']);
  offLate!();
  expect(signal.waiting()).toBe(0);
});

test("an agent's stream is woken by its events and told when its key may have changed, and counted while open", async () => {
  const agent = crypto.randomUUID();
  const off = signal.subscribeEvents(agent, waiter('event'), waiter('changed'))!;
  expect(signal.streaming()).toBe(1);
  expect(await notifyAll(EVENTS_CHANNEL, agent)).toEqual(['event']);
  expect(await notifyAll(INBOX_CHANNEL, agent)).toEqual(['event']);
  expect(await notifyAll(AGENTS_CHANNEL, agent)).toEqual(['changed']);
  off();
  expect(signal.streaming()).toBe(0);
  expect(await notifyAll(EVENTS_CHANNEL, agent)).toEqual([]);
  expect(await notifyAll(AGENTS_CHANNEL, agent)).toEqual([]);
});
