import { AgentCard, A2A_VERSION_HEADER, formatSSEEvent } from '@a2a-js/sdk';
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from '@a2a-js/sdk/server';
import { A2A_ERROR_CODE, toJsonRpcError } from '@a2a-js/sdk/errors';
import { Elysia, t } from 'elysia';
import { webhookUrlPolicy, type Config } from '../config';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import type { InboxSignal } from '../db/inbox-signal';
import { activeAgentNamed, listedAgent } from '../domain/agents/agents';
import { authenticateAgent } from '../domain/agents/authentication';
import type { Logger } from '../log';
import { agentAuth, bearerChallenge } from '../web/agent-auth';
import { requestIdOf, requestLog } from '../web/request-id';
import { eventStreamResponse, type EventSink } from '../web/event-stream';
import { endWhenRevoked } from '../web/held-credential';
import type { HeldStreams } from '../web/held-streams';
import { A2A_VERSION, agentCard } from './agent-card';
import { a2aRequestHandler } from './request-handler';

const Params = t.Object({ username: t.String() });

// The public address of this service, which the card names: PUBLIC_URL, or the one asked.
const originOf = (request: Request, config: Config) => (config.PUBLIC_URL ? new URL(config.PUBLIC_URL).origin : new URL(request.url).origin);

// Bytes a stream may leave unread by its client before it is cut (a task's updates are small and
// few; this is many of them).
const STREAM_BACKLOG_BYTES = 256 * 1024;

// A2A (docs/a2a.md): each active agent is reached at /a2a/agents/{username}, JSON-RPC 2.0 over
// POST, and described by its card below that address. Both need the caller's own agent key, but
// for the card of an agent whose owner chose to list it: no stranger learns which names exist.
// Refusals before the JSON-RPC request is read (no key: 401, no such agent: 404) are in the
// service's envelope; everything after is JSON-RPC, in the SDK's transport.
export const a2aRoutes = (sql: Sql, inboxSignal: InboxSignal, agentCache: AgentCache, streams: HeldStreams, log: Logger, config: Config) =>
  new Elysia({ name: 'a2a-routes', prefix: '/a2a/agents' })
    .use(agentAuth(sql, agentCache))
    .get(
      '/:username/.well-known/agent-card.json',
      async ({ params, request, set }) => {
        // A card its owner listed is anyone's to read; any other only with an agent key, and a
        // stranger is told the same whether the name exists or not.
        const authorization = request.headers.get('authorization');
        const listed = authorization ? null : await listedAgent(sql, params.username);
        if (!listed) {
          await authenticateAgent(sql, agentCache, authorization).catch((error: unknown) => {
            set.headers['www-authenticate'] = bearerChallenge(request);
            throw error;
          });
        }
        const agent = listed ?? (await activeAgentNamed(sql, params.username));
        return AgentCard.toJSON(agentCard(originOf(request, config), agent.username));
      },
      { params: Params, detail: { hide: true } },
    )
    .post(
      '/:username',
      async ({ agent, params, body, request, set, server }) => {
        const recipient = await activeAgentNamed(sql, params.username);
        const card = agentCard(originOf(request, config), recipient.username);
        const context = new ServerCallContext({ requestedVersion: request.headers.get(A2A_VERSION_HEADER) ?? undefined });
        set.headers['content-type'] = 'application/json';
        try {
          validateVersion(context.requestedVersion, card, 'JSONRPC');
        } catch (error) {
          return { jsonrpc: '2.0', id: idOf(body), error: toJsonRpcError(error) };
        }
        const requestLogger = requestLog(log, request);
        // A stream ends when its client leaves or its credential stops answering.
        const ended = new AbortController();
        const end = () => ended.abort();
        const handler = a2aRequestHandler({
          sql,
          inboxSignal,
          log: requestLogger,
          abort: AbortSignal.any([request.signal, ended.signal]),
          credentialChanged: endWhenRevoked({ sql, inboxSignal, log: requestLogger }, agent, request, end),
          holdStream: () => streams.take(agent.id),
          requestId: requestIdOf(request),
          caller: agent,
          recipient,
          card,
          stalledAfterMs: config.STALLED_AFTER_MS,
          idempotencyRetentionMs: config.IDEMPOTENCY_RETENTION_MS,
          webhookPolicy: webhookUrlPolicy(config),
        });
        const answer = await new JsonRpcTransportHandler(handler).handle(body as string, context);
        if (!(Symbol.asyncIterator in answer)) return unreadParams(answer, body);
        // A refusal before the stream's first event is answered as any JSON-RPC error is.
        let first: IteratorResult<unknown>;
        try {
          first = await answer.next();
        } catch (error) {
          return { jsonrpc: '2.0', id: idOf(body), error: toJsonRpcError(error) };
        }
        // Silent between updates, longer than Bun's idle limit allows by default.
        server?.timeout(request, 0);
        return eventStreamResponse({
          request,
          backlogBytes: STREAM_BACKLOG_BYTES,
          heartbeatMs: config.EVENT_HEARTBEAT_MS,
          log: requestLogger,
          cutLog: { event: 'a2a_stream_dropped', reason: 'the client stopped reading' },
          open: (sink) => {
            void pump(first, answer, sink, idOf(body));
            return () => {
              end();
              void answer.return(undefined);
            };
          },
        });
      },
      { agentWithRawBody: true, params: Params, detail: { hide: true } },
    );

// Sends a stream's events as they come, an error as the last of them, then ends it.
async function pump(first: IteratorResult<unknown>, rest: AsyncGenerator<unknown>, sink: EventSink, id: string | number | null) {
  if (first.done || !sink.send(formatSSEEvent(first.value))) return sink.finish();
  for (;;) {
    let next: IteratorResult<unknown>;
    try {
      next = await rest.next();
    } catch (error) {
      sink.send(formatSSEEvent({ jsonrpc: '2.0', id, error: toJsonRpcError(error) }));
      break;
    }
    if (next.done || !sink.send(formatSSEEvent(next.value))) break;
  }
  sink.finish();
}

// Every error our handler raises is an A2A error, with its details. One without them is the SDK's
// own: a request whose params it could not decode (a part that is not an object, bytes that are
// not base64), answered with the JavaScript error's text as an internal error. It is the
// client's request that is wrong, and the text says nothing useful to it.
function unreadParams<T extends object>(answer: T, body: unknown): T {
  const error = (answer as { error?: { code?: unknown; data?: unknown } }).error;
  if (error?.code !== A2A_ERROR_CODE.INTERNAL_ERROR || error.data !== undefined) return answer;
  const method = methodOf(body);
  return { ...answer, error: { code: A2A_ERROR_CODE.INVALID_PARAMS, message: `The params could not be read as those of ${method || 'the method'} in A2A ${A2A_VERSION}.` } };
}

// The id of a JSON-RPC request, for an error answered before the transport reads it.
function idOf(body: unknown): string | number | null {
  const id = parsed(body)?.id;
  return typeof id === 'string' || typeof id === 'number' ? id : null;
}

function methodOf(body: unknown): string {
  const method = parsed(body)?.method;
  return typeof method === 'string' ? method : '';
}

function parsed(body: unknown): Record<string, unknown> | null {
  try {
    const value = JSON.parse(String(body)) as unknown;
    return value && typeof value === 'object' ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
