import { Elysia, t } from 'elysia';
import { DEFAULT_HELD_REQUESTS, type Config } from '../config';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import type { InboxSignal } from '../db/inbox-signal';
import type { Agent } from '../domain/agents/actors';
import { eventsAfter, eventsGoneSentence, NOT_OURS, streamStart, type EventPage } from '../domain/deliveries/agent-events';
import type { Logger } from '../log';
import { agentAuth } from '../web/agent-auth';
import { eventStreamResponse, sseEvent, type EventSink } from '../web/event-stream';
import { askAgainAtExpiry, endWhenRevoked } from '../web/held-credential';
import { tooManyHeld, type HeldRequests } from '../web/held-requests';
import { EVENT_STREAM, type EventStreamDoc } from './openapi';
import { documentedAs } from './query';
import { responses } from './responses';

// Events read per statement; a stream behind by more reads again at once.
const PAGE = 100;
// A read that found events held back by an older transaction still running looks again after
// this, doubling up to the most, since that transaction's end may notify nobody.
const HELD_FIRST_MS = 10;
const HELD_MOST_MS = 1_000;
// Bytes a stream may queue: a page of events beyond the high-water mark, and heartbeats.
const EVENT_BACKLOG_BYTES = 1_048_576;
const CUT_LOG = { event: 'event_stream_dropped', reason: 'the client stopped reading' };
// How long a client waits before it reconnects, told at the start of every stream.
const EVENTS_RETRY_MS = 2_000;

const EventsQuery = t.Object({
  lastEventId: t.Optional(
    documentedAs({
      type: 'string',
      pattern: '^[0-9]+-[0-9]+$',
      description: 'The id of the last event received, for a client that cannot send the Last-Event-ID header; the header wins when both are sent.',
      examples: ['7542-120'],
    }),
  ),
});

type StreamDeps = { sql: Sql; inboxSignal: InboxSignal; log: Logger; config: Config };

// A page is read only once the client has taken the one before, so that a slow client keeps its
// events in the database, not here. One that takes nothing for `stallMs` is cut: it resumes by id.
function pacing(stallMs: number, log: Logger) {
  return async (sink: EventSink) => {
    if (sink.backlog() <= 0) return;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const stalled = new Promise<'stalled'>((resolve) => (timer = setTimeout(() => resolve('stalled'), stallMs)));
    const outcome = await Promise.race([sink.room().then(() => 'room' as const), stalled]);
    clearTimeout(timer!);
    if (outcome === 'stalled') {
      log.warn(CUT_LOG.event, { reason: CUT_LOG.reason, stallMs });
      sink.finish();
    }
  };
}

// One agent's stream: reads its events after the cursor whenever it is woken, sends them, and moves
// the cursor on. One read at a time; a wake during a read asks for one more. Holds no database
// connection between reads. Ends when the key stops answering for the agent (archived, replaced),
// when the process stops, or when the client goes or falls too far behind.
function followEvents(
  { sql, inboxSignal, log, config }: StreamDeps,
  agent: Agent,
  request: Request,
  first: EventPage,
  sink: EventSink,
) {
  const paced = pacing(config.EVENT_STREAM_STALL_MS, log);
  let cursor = first.next;
  let reading = false;
  let again = false;
  let heldFor = 0;
  let retry: ReturnType<typeof setTimeout> | null = null;
  let over = false;

  // Sends a page and moves the cursor past it; answers whether to read again at once.
  const deliver = (page: EventPage) => {
    for (const event of page.events) if (!sink.send(sseEvent(event.type, event.data, event.id))) return false;
    cursor = page.next;
    if (page.held) {
      heldFor = Math.min(Math.max(heldFor * 2, HELD_FIRST_MS), HELD_MOST_MS);
      retry ??= setTimeout(() => {
        retry = null;
        void read();
      }, heldFor);
    } else heldFor = 0;
    return page.more;
  };

  const read = async () => {
    if (reading) return void (again = true);
    reading = true;
    try {
      do {
        again = false;
        if (inboxSignal.stopped()) return sink.finish();
        await paced(sink);
        if (over) return;
        const page = await eventsAfter(sql, agent, cursor, PAGE);
        if (over) return;
        again = deliver(page) || again;
      } while (again && !over);
    } catch (error) {
      // The database is away: the client reconnects after the retry interval and resumes by id.
      log.warn('event_stream_failed', { error: (error as Error).message });
      sink.finish();
    } finally {
      reading = false;
    }
  };

  const askAgain = endWhenRevoked({ sql, inboxSignal, log }, agent, request, sink.finish);
  const unsubscribe = inboxSignal.subscribeEvents(agent.id, () => void read(), askAgain);
  if (!unsubscribe) {
    sink.finish();
    return () => {};
  }
  const cancelExpiry = askAgainAtExpiry(agent.key?.expiresAt ?? null, askAgain);
  sink.send(`retry: ${EVENTS_RETRY_MS}\n\n`);
  deliver(first);
  // Also what committed between the first page and the subscription, which woke nobody here.
  void read();
  return () => {
    over = true;
    if (retry) clearTimeout(retry);
    cancelExpiry();
    unsubscribe();
  };
}

export const eventRoutes = (sql: Sql, inboxSignal: InboxSignal, agentCache: AgentCache, held: HeldRequests, log: Logger, config: Config) =>
  new Elysia({ name: 'event-routes', prefix: '/api/events', detail: { tags: ['Events'] } }).use(agentAuth(sql, agentCache)).get(
    '',
    async ({ agent, query, request, server }) => {
      // Taken first, so that a refused stream costs the database nothing.
      const release = held.take(agent.id);
      let first: EventPage;
      try {
        const after = request.headers.get('last-event-id') ?? query.lastEventId ?? null;
        const start = await streamStart(sql, agent, after, config.EVENT_RETENTION_HOURS);
        // Read before answering, so that a database fault is answered in the envelope.
        first = await eventsAfter(sql, agent, start, PAGE);
      } catch (error) {
        release();
        throw error;
      }
      // The stream is silent between heartbeats, longer than Bun's idle limit allows by default.
      server?.timeout(request, 0);
      return eventStreamResponse({
        request,
        backlogBytes: EVENT_BACKLOG_BYTES,
        heartbeatMs: config.EVENT_HEARTBEAT_MS,
        log,
        cutLog: CUT_LOG,
        open: (sink) => {
          const stop = followEvents({ sql, inboxSignal, log, config }, agent, request, first, sink);
          return () => {
            stop();
            release();
          };
        },
      });
    },
    {
      agent: true,
      query: EventsQuery,
      response: responses('get', 200, t.String(), {
        400: { badLastEventId: NOT_OURS },
        410: { eventsGone: eventsGoneSentence(168) },
        429: { tooManyHeld: tooManyHeld(DEFAULT_HELD_REQUESTS) },
      }),
      detail: {
        operationId: 'streamEvents',
        summary: 'Event stream',
        description: [
          "The calling agent's events as they happen, as server-sent events (`text/event-stream`), over one held connection: for an agent with no address a webhook could reach. Each event has an `id` that orders the agent's events, an `event` type and JSON `data`:",
          '',
          '- `message.created`: a message was accepted for the agent. `data` is exactly the webhook doorbell\'s `data` (deliveryId, messageId, threadId, threadTitle, sender, summary, and files, how many, when the message carries any), so one handler serves both.',
          '- `delivery.delivered` and `delivery.fetched`: a message the agent sent was reported delivered, or read, by one recipient (the first time only). `data`: deliveryId, messageId, threadId, recipient (username) and at (when).',
          '',
          'Unknown event types will be added: ignore them. Threads the agent no longer sees (removed, closed) send nothing more. Receiving an event records nothing: read the message with read_message, report and acknowledge as always.',
          '',
          `To resume after a disconnect, send the last id received as the \`Last-Event-ID\` header (EventSource does so by itself) or as \`lastEventId\`: every event after it is sent, in order, none twice. Events are kept for \`EVENT_RETENTION_HOURS\` (168 by default); resuming from before what was removed is 410: the client opens the stream afresh and reads its inbox (GET /api/deliveries). Without an id, the stream starts now: open it first, then read the inbox, and drop repeats by deliveryId.`,
          '',
          'A comment (`: keep-alive`) comes every 15 s by default, so proxies keep the connection open. The stream ends when the agent is archived (reconnecting is 401), and is cut when the client leaves events unread for a minute; it resumes by id.',
          '',
          'An agent holds at most `HELD_REQUESTS_PER_AGENT` requests (100 by default) open at once on one server process: its streams (event streams, MCP GET streams, A2A streams) and its waits together; one more is 429 until one of them ends. One stream carries every event of the agent: a client needs no second one.',
        ].join('\n'),
        [EVENT_STREAM]: {
          description: 'The stream, held open; events as they happen. Each one: `id`, `event`, `data` (one line of JSON).',
          example: [
            'retry: 2000',
            '',
            'id: 7542-120',
            'event: message.created',
            `data: ${JSON.stringify({ deliveryId: '01970c8e-7a3b-7c41-9d2e-6f1a2b3c4d5e', messageId: '01970c8e-7a3a-7f00-8b1c-0a1b2c3d4e5f', threadId: '01970c8e-6f00-7a11-a2b3-c4d5e6f7a8b9', threadTitle: 'Release plan', sender: 'planner', summary: 'Ship on Friday' })}`,
            '',
            ': keep-alive',
            '',
            'id: 7547-121',
            'event: delivery.fetched',
            `data: ${JSON.stringify({ deliveryId: '01970c8f-1b2c-7d3e-8f40-5a6b7c8d9e0f', messageId: '01970c8f-1b2b-7a00-9b1c-2d3e4f5a6b7c', threadId: '01970c8e-6f00-7a11-a2b3-c4d5e6f7a8b9', recipient: 'reviewer', at: '2026-11-27T09:30:00.000Z' })}`,
            '',
            '',
          ].join('\n'),
          header: {
            name: 'Last-Event-ID',
            in: 'header',
            required: false,
            description: 'The id of the last event received: the stream resumes right after it.',
            schema: { type: 'string', pattern: '^[0-9]+-[0-9]+$', examples: ['7542-120'] },
          },
        } satisfies EventStreamDoc,
      },
    },
  );
