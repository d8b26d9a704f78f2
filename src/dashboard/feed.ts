import type { Sql } from '../db/connect';
import { DELIVERY_CHANNEL } from '../domain/announce';
import { deliveryProgress, type DeliveryProgress } from '../domain/delivery-progress';
import type { SessionEnd } from '../domain/people';
import type { Logger } from '../log';
import type { SessionStreams } from './session-streams';

type Subscriber = (deliveries: DeliveryProgress[]) => void;

// One LISTEN connection per process, fanned out to every open dashboard. Notifications arrive per
// changed delivery (a trigger fires on every step change and attempt, whoever made it); they are
// gathered for a moment so that a burst costs one query, and each subscriber gets the fresh rows.
export function deliveryFeed(sql: Sql, stalledAfterMs: number, log: Logger, gatherMs = 50) {
  const subscribers = new Set<Subscriber>();
  const pending = new Set<string>();
  let timer: ReturnType<typeof setTimeout> | null = null;
  let listening: Promise<unknown> | null = null;

  async function flush() {
    timer = null;
    const ids = [...pending];
    pending.clear();
    if (subscribers.size === 0) return;
    try {
      const rows = await deliveryProgress(sql, ids, stalledAfterMs);
      for (const subscriber of subscribers) subscriber(rows);
    } catch (error) {
      log.error('delivery_feed_failed', { error: (error as Error).message });
    }
  }

  function heard(id: string) {
    pending.add(id);
    timer ??= setTimeout(flush, gatherMs);
  }

  return {
    // Resolves once the LISTEN is in place, so a change made after it is never missed.
    async subscribe(subscriber: Subscriber): Promise<() => void> {
      // A failed LISTEN is forgotten, so that the next subscriber tries again.
      listening ??= sql.listen(DELIVERY_CHANNEL, heard).catch((error) => {
        listening = null;
        throw error;
      });
      await listening;
      subscribers.add(subscriber);
      return () => subscribers.delete(subscriber);
    },
  };
}

export type DeliveryFeed = ReturnType<typeof deliveryFeed>;

// What the page shows when its stream ends with the session.
const SESSION_ENDED: Record<SessionEnd, string> = {
  expired: 'Your session expired; sign in again.',
  'signed-out': 'You signed out; sign in again.',
};

// Bytes of events a browser may leave unread before its stream is closed. A page that stopped
// reading (a sleeping laptop, a stalled connection) would otherwise hold every later change in the
// server's memory; closed, its EventSource reconnects when it can and the page reloads its view.
export const STREAM_BACKLOG_BYTES = 1_048_576;
const HIGH_WATER_BYTES = 16 * 1024;

// A server-sent event stream of delivery changes, with a comment every 20 s so that proxies keep
// an idle stream open. Ends when the browser goes away, when it falls too far behind, or when the
// session it was opened with ends: then a last `session-ended` event says why, so that the page
// stops instead of reconnecting.
export async function deliveryEvents(
  feed: DeliveryFeed,
  sessions: SessionStreams,
  token: string,
  request: Request,
  { backlogBytes = STREAM_BACKLOG_BYTES, log }: { backlogBytes?: number; log?: Logger } = {},
): Promise<Response> {
  const encoder = new TextEncoder();
  let stop = () => {};
  const stream = new ReadableStream<Uint8Array>(
    {
      async start(controller) {
        const finish = () => {
          stop();
          try {
            controller.close();
          } catch {}
        };
        const send = (text: string) => {
          // The bytes queued and not yet taken by the connection.
          if (HIGH_WATER_BYTES - (controller.desiredSize ?? 0) > backlogBytes) {
            log?.warn('dashboard_stream_dropped', { reason: 'the browser stopped reading', backlogBytes });
            return finish();
          }
          try {
            controller.enqueue(encoder.encode(text));
          } catch {
            stop();
          }
        };
        const unsubscribe = await feed.subscribe((rows) => {
          for (const row of rows) send(`event: delivery\ndata: ${JSON.stringify(row)}\n\n`);
        });
        const heartbeat = setInterval(() => send(': keep-alive\n\n'), 20_000);
        const unwatch = sessions.watch(token, (why) => {
          send(`event: session-ended\ndata: ${JSON.stringify({ error: SESSION_ENDED[why] })}\n\n`);
          finish();
        });
        stop = () => {
          clearInterval(heartbeat);
          unsubscribe();
          unwatch();
        };
        request.signal.addEventListener('abort', finish);
        send('retry: 2000\nevent: ready\ndata: {}\n\n');
      },
      cancel() {
        stop();
      },
    },
    new ByteLengthQueuingStrategy({ highWaterMark: HIGH_WATER_BYTES }),
  );
  return new Response(stream, {
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' },
  });
}
