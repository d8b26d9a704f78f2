import { expect, test } from 'bun:test';
import { deliveryEvents, deliveryFeed } from '../src/dashboard/feed';
import { sessionStreams } from '../src/dashboard/session-streams';
import { createLogger, silentLogger } from '../src/log';
import { uniqueName, useHarness } from './support/harness';
import { eventually } from './support/receiver';
import { onPrimary } from '../src/db/connect';

// Memory stays bounded: a dashboard's event stream that nobody reads is closed once what waits for
// it passes the bound, instead of holding every later change.
const h = useHarness();

test('an event stream left unread is closed once its backlog passes the bound, and what was queued still reads', async () => {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
  const feed = deliveryFeed(h.db.sql, onPrimary(h.db.sql), 60_000, silentLogger, 5);
  const streams = sessionStreams(h.db.sql, 60_000, silentLogger);
  const sender = await h.agent(uniqueName('sender'));
  const recipient = await h.agent(uniqueName('recipient'));
  const { id } = await h.post(sender, await h.thread(sender, [recipient]), 'watched');
  const [delivery] = await h.db.sql`select id from deliveries where message_id = ${id}`;
  const response = await deliveryEvents(feed, streams, 'no-session-needed', new Request('http://localhost/'), { backlogBytes: 2_048, log });
  // The browser reads the first event, then stops reading. Each notification below is one change
  // event of several hundred bytes.
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = decoder.decode((await reader.read()).value);
  for (let i = 0; i < 12 && lines.length === 0; i++) {
    await h.db.sql`select pg_notify('ams_delivery', ${delivery!.id})`;
    await Bun.sleep(30);
  }
  await eventually(async () => lines.length === 1);
  const { time: _, ...line } = lines[0]!;
  expect(line).toEqual({ level: 'warn', event: 'dashboard_stream_dropped', reason: 'the browser stopped reading', backlogBytes: 2_048 });
  // What was queued is still there to read, and then the stream ends.
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += decoder.decode(chunk.value);
  expect(text.startsWith('retry: 2000\nevent: ready\ndata: {}\n\n')).toBe(true);
  const events = text.split('\n\n').filter((e) => e.startsWith('event: delivery'));
  expect(events.length).toBeGreaterThan(0);
  expect(Buffer.byteLength(text)).toBeLessThan(2_048 + 4_096);
});
