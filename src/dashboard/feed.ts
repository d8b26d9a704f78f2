import type { Reads, Sql } from '../db/connect';
import { DELIVERY_CHANNEL } from '../domain/deliveries/delivery-wake-ups';
import { deliveryProgress, type DeliveryProgress } from '../domain/deliveries/delivery-progress';
import type { SessionEnd } from '../domain/people/people';
import type { Logger } from '../log';
import { SESSION_ENDED, STREAM_RETRY_MS, type StreamEvent } from '../web/dashboard-protocol';
import { eventStreamResponse, sseEvent } from '../web/event-stream';
import type { SessionStreams } from './session-streams';

// What an open page hears: the fresh progress of changed deliveries, or that threads (by id) or
// agents changed, for the Threads and Agents pages to read their lists again.
export type FeedEvent = { kind: 'delivery'; rows: DeliveryProgress[] } | { kind: 'thread'; ids: string[] } | { kind: 'agent' };
type Subscriber = (event: FeedEvent) => void;

// Changes to threads (opened, close requested or decided, participants) and agents, as
// `thread:<id>` and `agent:<id>`, sent by the triggers of sql/013.
export const DASHBOARD_CHANNEL = 'ams_dashboard';

// One LISTEN connection per process, fanned out to every open dashboard. Notifications arrive per
// changed delivery (a trigger fires on every step change and attempt, whoever made it), thread or
// agent; they are gathered for a moment so that a burst costs one query and one event of each kind.
// `reads` is where the pages' lists are read (db/reads.ts).
export function deliveryFeed(sql: Sql, reads: Reads, stalledAfterMs: number, log: Logger, gatherMs = 50) {
  const subscribers = new Set<Subscriber>();
  const pending = new Set<string>();
  const threads = new Set<string>();
  let agents = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let listening: Promise<unknown> | null = null;

  const tell = (event: FeedEvent) => {
    for (const subscriber of subscribers) subscriber(event);
  };

  async function flush() {
    timer = null;
    const ids = [...pending];
    const threadIds = [...threads];
    const agentsChanged = agents;
    pending.clear();
    threads.clear();
    agents = false;
    if (subscribers.size === 0) return;
    // Pages read their lists and the Overview again when told, and those reads may run on a
    // replica: told only once it has the changes, a page never reads the moment before them.
    await reads.caughtUp();
    if (threadIds.length > 0) tell({ kind: 'thread', ids: threadIds });
    if (agentsChanged) tell({ kind: 'agent' });
    if (ids.length === 0) return;
    try {
      tell({ kind: 'delivery', rows: await deliveryProgress(sql, ids, stalledAfterMs) });
    } catch (error) {
      log.error('delivery_feed_failed', { error: (error as Error).message });
    }
  }

  const soon = () => {
    timer ??= setTimeout(flush, gatherMs);
  };

  function heardDelivery(id: string) {
    pending.add(id);
    soon();
  }

  function heardListing(payload: string) {
    const [kind, id] = payload.split(':');
    if (kind === 'thread' && id) threads.add(id);
    else if (kind === 'agent') agents = true;
    else return;
    soon();
  }

  return {
    // Resolves once the LISTENs are in place, so a change made after it is never missed.
    async subscribe(subscriber: Subscriber): Promise<() => void> {
      // A failed LISTEN is forgotten, so that the next subscriber tries again.
      listening ??= Promise.all([sql.listen(DELIVERY_CHANNEL, heardDelivery), sql.listen(DASHBOARD_CHANNEL, heardListing)]).catch((error) => {
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

// What the page is told when its stream ends with the session. Typed by the domain's SessionEnd, so
// that a new way for a session to end cannot go without its sentence and code.
const endings: Record<SessionEnd, { code: string; sentence: string }> = SESSION_ENDED;

const event = (name: StreamEvent, data: unknown) => sseEvent(name, data);

// Bytes of events a browser may leave unread before its stream is closed; closed, its EventSource
// reconnects when it can and the page reloads its view.
export const STREAM_BACKLOG_BYTES = 1_048_576;

// A server-sent event stream of delivery changes, with a comment every 20 s so that proxies keep
// an idle stream open. Ends when the browser goes away, when it falls too far behind, or when the
// session it was opened with ends: then a last `session-ended` event says why, so that the page
// stops instead of reconnecting.
export function deliveryEvents(
  feed: DeliveryFeed,
  sessions: SessionStreams,
  token: string,
  request: Request,
  { backlogBytes = STREAM_BACKLOG_BYTES, log }: { backlogBytes?: number; log?: Logger } = {},
): Response {
  return eventStreamResponse({
    request,
    backlogBytes,
    heartbeatMs: 20_000,
    log,
    cutLog: { event: 'dashboard_stream_dropped', reason: 'the browser stopped reading' },
    async open({ send, finish }) {
      const unsubscribe = await feed.subscribe((change) => {
        if (change.kind === 'delivery') for (const row of change.rows) send(event('delivery', row));
        else send(event(change.kind, change.kind === 'thread' ? { ids: change.ids } : {}));
      });
      const unwatch = sessions.watch(token, (why) => {
        send(event('session-ended', { error: endings[why].sentence, code: endings[why].code }));
        finish();
      });
      send(`retry: ${STREAM_RETRY_MS}\n${event('ready', {})}`);
      return () => {
        unsubscribe();
        unwatch();
      };
    },
  });
}
