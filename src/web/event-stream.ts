import type { Logger } from '../log';

const encoder = new TextEncoder();

// One server-sent event.
export const sseEvent = (name: string, data: unknown, id?: string) =>
  `${id === undefined ? '' : `id: ${id}\n`}event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

// How much of a stream may wait in memory before the connection is asked for more. Bun sizes each
// response's buffer to it: at 16 KiB, ten thousand open streams held 310 MB; at 1 KiB, 256 MB
// (docs/internals/performance.md). An event is a few hundred bytes, and a client that reads keeps
// the queue near empty whatever the mark.
const HIGH_WATER_BYTES = 1024;
// The queuing a bounded stream is made with, so that queuedBytes below measures it.
export const byteQueuing = () => new ByteLengthQueuingStrategy({ highWaterMark: HIGH_WATER_BYTES });
// Bytes queued on a stream made with byteQueuing and not yet taken by the connection; null once the
// stream has errored.
export const queuedBytes = (controller: ReadableStreamDefaultController<Uint8Array>): number | null =>
  controller.desiredSize === null ? null : HIGH_WATER_BYTES - controller.desiredSize;

// The streams beating at one interval, dealt in turn round the slots of a wheel that `turn`
// moves on one slot at a time, beating that slot's streams: each stream beats once a revolution,
// and a turn beats only its share. Dealt in turn rather than by when they open, since clients
// coming back together after a restart would otherwise share a slot; a stream's first beat may
// so come early, which costs nothing. Answers, for each stream added, how to take it off, which
// answers how many streams are left on the wheel.
export function heartbeatWheel(slots: number) {
  const wheel = Array.from({ length: slots }, () => new Set<() => void>());
  let dealt = 0;
  let turns = 0;
  let streams = 0;
  return {
    add(beat: () => void): () => number {
      const slot = wheel[dealt++ % slots]!;
      slot.add(beat);
      streams++;
      return () => {
        if (slot.delete(beat)) streams--;
        return streams;
      };
    },
    turn() {
      wheel[turns++ % slots]!.forEach((beat) => beat());
    },
  };
}

// One timer per heartbeat interval for every stream open with it, rather than one per stream: ten
// thousand open streams would otherwise hold ten thousand timers. It turns a wheel of a slot per
// HEARTBEAT_TICK_MS of the interval: ten thousand streams beaten in one go held the event loop for
// 100 to 240 ms at every interval (docs/internals/performance.md), and every request meanwhile.
const HEARTBEAT_TICK_MS = 100;
const heartbeats = new Map<number, { wheel: ReturnType<typeof heartbeatWheel>; timer: ReturnType<typeof setInterval> }>();
function beatEvery(ms: number, beat: () => void): () => void {
  let group = heartbeats.get(ms);
  if (!group) {
    const slots = Math.max(1, Math.round(ms / HEARTBEAT_TICK_MS));
    const wheel = heartbeatWheel(slots);
    group = { wheel, timer: setInterval(wheel.turn, ms / slots) };
    heartbeats.set(ms, group);
  }
  const { wheel, timer } = group;
  const takeOff = wheel.add(beat);
  return () => {
    if (takeOff() > 0 || heartbeats.get(ms)?.timer !== timer) return;
    clearInterval(timer);
    heartbeats.delete(ms);
  };
}

export type EventSink = {
  // Queues text for the client; false once the stream has ended (by the client, or cut here).
  send(text: string): boolean;
  // Ends the stream from this side.
  finish(): void;
  // The bytes queued and not yet taken by the connection.
  backlog(): number;
  // Resolves once the client has taken what was queued (down to the queue's high-water mark), for
  // a sender that reads what it sends from elsewhere to pace itself by the client.
  room(): Promise<void>;
};

export type EventStreamOptions = {
  request: Request;
  // Bytes a client may leave unread before its stream is cut. A client that stopped reading (a
  // sleeping laptop, a stalled connection) would otherwise hold every later event in the server's
  // memory; cut, it reconnects when it can and picks up from what it last read.
  backlogBytes: number;
  // A comment this often keeps proxies from closing an idle stream.
  heartbeatMs: number;
  log?: Logger;
  // Logged when a client is cut for not reading, with the backlog.
  cutLog: { event: string; reason: string };
  // Called once the stream is open; answers what to undo when it ends, however it ends.
  open(sink: EventSink): (() => void) | Promise<() => void>;
};

// A text/event-stream response, bounded in memory per client, with heartbeats, that runs `open`'s
// cleanup exactly once whether the client leaves, falls too far behind, or the server ends it.
export function eventStreamResponse({ request, backlogBytes, heartbeatMs, log, cutLog, open }: EventStreamOptions): Response {
  let cleanup: (() => void) | null = null;
  let ended = false;
  let stopBeating: (() => void) | null = null;
  const end = () => {
    if (ended) return;
    ended = true;
    stopBeating?.();
    freeRoom();
    request.signal.removeEventListener('abort', onAbort);
    cleanup?.();
    cleanup = null;
  };
  let onAbort = () => {};
  let roomWaiters: (() => void)[] = [];
  const freeRoom = () => {
    const waiters = roomWaiters;
    roomWaiters = [];
    for (const resolve of waiters) resolve();
  };
  const stream = new ReadableStream<Uint8Array>(
    {
      async start(controller) {
        const backlog = () => queuedBytes(controller) ?? HIGH_WATER_BYTES;
        const finish = () => {
          end();
          try {
            controller.close();
          } catch {}
        };
        const send = (text: string) => {
          if (ended) return false;
          if (backlog() > backlogBytes) {
            log?.warn(cutLog.event, { reason: cutLog.reason, backlogBytes });
            finish();
            return false;
          }
          try {
            controller.enqueue(encoder.encode(text));
            return true;
          } catch {
            end();
            return false;
          }
        };
        const room = () =>
          ended || (controller.desiredSize ?? 0) > 0 ? Promise.resolve() : new Promise<void>((resolve) => roomWaiters.push(resolve));
        onAbort = finish;
        request.signal.addEventListener('abort', onAbort);
        stopBeating = beatEvery(heartbeatMs, () => send(': keep-alive\n\n'));
        let undo: () => void;
        try {
          undo = await open({ send, finish, backlog, room });
        } catch (error) {
          end();
          controller.error(error);
          return;
        }
        if (ended) undo();
        else cleanup = undo;
        // A client that left before the stream started fires no abort event to listen for.
        if (request.signal.aborted) finish();
      },
      pull() {
        freeRoom();
      },
      cancel() {
        end();
      },
    },
    byteQueuing(),
  );
  return new Response(stream, {
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' },
  });
}
