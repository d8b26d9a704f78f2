import { expect, test } from 'bun:test';
import { randomUUID } from 'node:crypto';
import { searchBounds } from '../src/config';
import { searchGate } from '../src/domain/shared/search-gate';
import { streamMcp } from '../src/mcp/server';
import { heldRequests } from '../src/web/held-requests';
import { createLogger } from '../src/log';
import { useHarness } from './support/harness';
import { eventually } from './support/receiver';
import { onPrimary } from '../src/db/connect';

// Memory stays bounded: an MCP client's GET stream that is no longer read is cut once what waits
// for it passes the bound, instead of holding every later update of the agent's inbox.
const h = useHarness();

const UPDATE = 'notifications/resources/updated';

async function openStream(backlogBytes: number) {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
  const agent = { id: randomUUID(), username: 'stream-reader' };
  const request = new Request('http://localhost/mcp', { headers: { accept: 'text/event-stream' } });
  const ctx = { sql: h.db.sql, searches: searchGate(onPrimary(h.db.sql), searchBounds(h.config)), held: heldRequests(h.config.HELD_REQUESTS_PER_AGENT), log, inboxSignal: h.inboxSignal, agent, abort: request.signal, idempotencyRetentionMs: 60_000, stalledAfterMs: 60_000, baseUrl: 'http://localhost' };
  let changed = () => {};
  let end = () => {};
  let unwatched = 0;
  const response = await streamMcp(request, ctx, log, { heartbeatMs: 60_000, backlogBytes }, (onChange, onEnd) => {
    changed = onChange;
    end = onEnd;
    return () => void unwatched++;
  });
  return { response, lines, changed: () => changed(), end: () => end(), unwatched: () => unwatched };
}

async function readToEnd(reader: { read: () => Promise<{ done: boolean; value?: Uint8Array }> }) {
  const decoder = new TextDecoder();
  let text = '';
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += decoder.decode(chunk.value);
  return text;
}

test('a GET stream left unread is cut once its backlog passes the bound, what was queued still reads, and its watch is released once', async () => {
  const stream = await openStream(2_048);
  expect(stream.response.status).toBe(200);
  // Each update is one server-sent event of about a hundred bytes; the client reads none of them.
  for (let i = 0; i < 60 && stream.lines.length === 0; i++) {
    stream.changed();
    await Bun.sleep(5);
  }
  await eventually(async () => stream.lines.length === 1);
  const { time: _, ...line } = stream.lines[0]!;
  expect(line).toEqual({ level: 'warn', event: 'mcp_stream_dropped', reason: 'the client stopped reading', backlogBytes: 2_048 });
  expect(stream.unwatched()).toBe(1);

  const text = await readToEnd(stream.response.body!.getReader());
  expect(text.startsWith(': open\n\n')).toBe(true);
  const updates = text.split('\n\n').filter((event) => event.includes(UPDATE));
  expect(updates.length).toBeGreaterThan(10);
  expect(Buffer.byteLength(text)).toBeLessThan(2_048 + 512);
  // Updates after the cut go nowhere, and release nothing twice.
  stream.changed();
  await Bun.sleep(50);
  expect([stream.unwatched(), stream.lines.length]).toEqual([1, 1]);
});

test('a GET stream that is read keeps every update, well past the bound, and is not cut', async () => {
  const stream = await openStream(2_048);
  const reader = stream.response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  for (let i = 0; i < 100; i++) {
    stream.changed();
    const { value } = await reader.read();
    text += decoder.decode(value);
    // The open comment came first; each later read takes what the transport had written by then.
    while (text.split(UPDATE).length - 1 < i + 1) text += decoder.decode((await reader.read()).value);
  }
  expect(text.split(UPDATE).length - 1).toBe(100);
  expect(Buffer.byteLength(text)).toBeGreaterThan(4 * 2_048);
  expect([stream.lines, stream.unwatched()]).toEqual([[], 0]);
  await reader.cancel();
  expect(stream.unwatched()).toBe(1);
  // Updates after the client left go nowhere, release nothing twice and log nothing.
  for (let i = 0; i < 5; i++) stream.changed();
  await Bun.sleep(50);
  expect([stream.lines, stream.unwatched()]).toEqual([[], 1]);
});

test('a GET stream ended by the service while its client is stalled releases its watch once, and what was queued still reads to the end', async () => {
  const stream = await openStream(64 * 1024);
  for (let i = 0; i < 5; i++) stream.changed();
  await Bun.sleep(50);
  stream.end();
  expect(stream.unwatched()).toBe(1);
  const text = await readToEnd(stream.response.body!.getReader());
  expect(text.startsWith(': open\n\n')).toBe(true);
  expect(text.split(UPDATE).length - 1).toBe(5);
  stream.end();
  stream.changed();
  await Bun.sleep(50);
  expect([stream.lines, stream.unwatched()]).toEqual([[], 1]);
});
