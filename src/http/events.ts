import { Elysia, t } from 'elysia';
import type { Config } from '../config';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import type { InboxSignal } from '../db/inbox-signal';
import type { Agent } from '../domain/agents/actors';
import { keyStillAnswers } from '../domain/agents/authentication';
import { eventsAfter, eventsGoneSentence, streamStart, type EventCursor } from '../domain/deliveries/agent-events';
import type { Logger } from '../log';
import { agentAuth } from '../web/agent-auth';
import { eventStreamResponse, sseEvent, type EventSink } from '../web/event-stream';
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
// How long a client waits before it reconnects, told at the start of every stream.
export const EVENTS_RETRY_MS = 2_000;

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
      log.warn('event_stream_dropped', { reason: 'the client stopped reading', stallMs });
      sink.finish();
    }
  };
}

// One agent's stream: reads its events after the cursor whenever it is woken, sends them, and moves
// the cursor on. One read at a time; a wake during a read asks for one more. Holds no database
// connection between reads. Ends when the key stops answering for the agent (archived, replaced),
// when the process stops, or when the client goes or falls too far behind.
function followEvents({ sql, inboxSignal, log, config }: StreamDeps, agent: Agent, authorization: string | null, start: EventCursor, sink: EventSink) {
  const paced = pacing(config.EVENT_STREAM_STALL_MS, log);
  let cursor = start;
  let reading = false;
  let again = false;
  let heldFor = 0;
  let retry: ReturnType<typeof setTimeout> | null = null;
  let over = false;

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
        for (const event of page.events) if (!sink.send(sseEvent(event.type, event.data, event.id))) return;
        cursor = page.next;
        if (page.held) {
          heldFor = Math.min(Math.max(heldFor * 2, HELD_FIRST_MS), HELD_MOST_MS);
          retry ??= setTimeout(() => {
            retry = null;
            void read();
          }, heldFor);
        } else heldFor = 0;
        again ||= page.events.length === PAGE;
      } while (again && !over);
    } catch (error) {
      // The database is away: the client reconnects after the retry interval and resumes by id.
      log.warn('event_stream_failed', { error: (error as Error).message });
      sink.finish();
    } finally {
      reading = false;
    }
  };

  const recheck = async () => {
    try {
      if (!(await keyStillAnswers(sql, agent, authorization))) sink.finish();
    } catch (error) {
      log.warn('event_stream_failed', { error: (error as Error).message });
      sink.finish();
    }
  };

  const unsubscribe = inboxSignal.subscribeEvents(agent.id, () => void read(), () => void recheck());
  if (!unsubscribe) {
    sink.finish();
    return () => {};
  }
  sink.send(`retry: ${EVENTS_RETRY_MS}\n\n`);
  void read();
  return () => {
    over = true;
    if (retry) clearTimeout(retry);
    unsubscribe();
  };
}

export const eventRoutes = (sql: Sql, inboxSignal: InboxSignal, agentCache: AgentCache, log: Logger, config: Config) =>
  new Elysia({ name: 'event-routes', prefix: '/api/events', detail: { tags: ['Events'] } }).use(agentAuth(sql, agentCache)).get(
    '',
    async ({ agent, query, request, server }) => {
      const after = request.headers.get('last-event-id') ?? query.lastEventId ?? null;
      const start = await streamStart(sql, agent, after, config.EVENT_RETENTION_HOURS);
      // The stream is silent between heartbeats, longer than Bun's idle limit allows by default.
      server?.timeout(request, 0);
      const authorization = request.headers.get('authorization');
      return eventStreamResponse({
        request,
        backlogBytes: EVENT_BACKLOG_BYTES,
        heartbeatMs: config.EVENT_HEARTBEAT_MS,
        log,
        cutLog: { event: 'event_stream_dropped', reason: 'the client stopped reading' },
        open: (sink) => followEvents({ sql, inboxSignal, log, config }, agent, authorization, start, sink),
      });
    },
    {
      agent: true,
      query: EventsQuery,
      response: responses('get', 200, t.String(), {
        400: { badLastEventId: 'Last-Event-ID must be the id of an event this stream sent (two whole numbers joined by "-").' },
        410: { eventsGone: eventsGoneSentence(168) },
      }),
      detail: {
        operationId: 'streamEvents',
        summary: 'Event stream',
        description: '',
      },
    },
  );
