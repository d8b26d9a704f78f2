import { AgentCard, A2A_VERSION_HEADER, formatSSEEvent } from '@a2a-js/sdk';
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from '@a2a-js/sdk/server';
import { A2A_ERROR_CODE, RequestMalformedError, toJsonRpcError } from '@a2a-js/sdk/errors';
import { Elysia, t } from 'elysia';
import { webhookUrlPolicy, type Config } from '../config';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import type { InboxSignal } from '../db/inbox-signal';
import { activeAgentNamed, listedAgent } from '../domain/agents/agents';
import { authenticateAgent } from '../domain/agents/authentication';
import { agentProfile } from '../domain/agents/directory';
import type { Logger } from '../log';
import { agentAuth, bearerChallenge } from '../web/agent-auth';
import { requestIdOf, requestLog } from '../web/request-id';
import { eventStreamResponse, type EventSink } from '../web/event-stream';
import { askAgainAtExpiry, endWhenRevoked } from '../web/held-credential';
import type { HeldRequests } from '../web/held-requests';
import { holdOpen } from '../web/hold-open';
import { agentCard } from './agent-card';
import { jsonRpcFailure, readJsonRpc, type JsonRpcFailure, type JsonRpcId, type JsonRpcRequest } from './json-rpc';
import { isA2AMethod, paramsProblem } from './params';
import { a2aRequestHandler } from './request-handler';

const Params = t.Object({ username: t.String() });

// The public address of this service, which the card names: PUBLIC_URL, or the one asked.
const originOf = (request: Request, config: Config) => (config.PUBLIC_URL ? new URL(config.PUBLIC_URL).origin : new URL(request.url).origin);

// Bytes a stream may leave unread by its client before it is cut (a task's updates are small and
// few; this is many of them).
const STREAM_BACKLOG_BYTES = 256 * 1024;

// Browser A2A clients are served (docs/internals/decisions.md, A2A): an agent key travels in a header that a
// page must be handed, never in a cookie, so a page elsewhere gains nothing by being let in. Every
// answer under /a2a/agents may be read by a page of any origin; a preflight is answered for the
// headers A2A clients send.
const READABLE_ANYWHERE = { 'access-control-allow-origin': '*', 'access-control-expose-headers': 'X-Request-Id, WWW-Authenticate, Retry-After' };
const PREFLIGHT = {
  ...READABLE_ANYWHERE,
  'access-control-allow-methods': 'GET, POST',
  'access-control-allow-headers': 'Authorization, Content-Type, A2A-Version, A2A-Extensions, X-A2A-Extensions, X-Request-Id',
  'access-control-max-age': '7200',
};
const preflight = () => new Response(null, { status: 204, headers: PREFLIGHT });

// A2A (docs/reference/a2a.md): each active agent is reached at /a2a/agents/{username}/ (the slash optional),
// JSON-RPC 2.0 over POST, and described by its card below that address. Both need the caller's own
// agent key, but for the card of an agent whose owner chose to list it: no stranger learns which
// names exist. Refusals before the JSON-RPC request is read (no key: 401, no such agent: 404) are
// in the service's envelope; everything after is JSON-RPC, in the SDK's transport.
export const a2aRoutes = (sql: Sql, inboxSignal: InboxSignal, agentCache: AgentCache, held: HeldRequests, log: Logger, config: Config) =>
  new Elysia({ name: 'a2a-routes', prefix: '/a2a/agents' })
    .use(agentAuth(sql, agentCache))
    .onRequest(({ request, set }) => {
      if (new URL(request.url).pathname.startsWith('/a2a/agents/')) Object.assign(set.headers, READABLE_ANYWHERE);
    })
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
        return AgentCard.toJSON(agentCard(originOf(request, config), agent.username, await agentProfile(sql, agent.id)));
      },
      { params: Params, detail: { hide: true } },
    )
    // Elysia matches the address with its trailing slash too, as the card names it.
    .post(
      '/:username',
      async ({ agent, params, body, request, set, server }) => {
        const recipient = await activeAgentNamed(sql, params.username);
        const card = agentCard(originOf(request, config), recipient.username);
        set.headers['content-type'] = 'application/json';
        const read = readJsonRpc(String(body));
        if ('refused' in read) return read.refused;
        const { request: rpc, id, notification } = read;
        const context = new ServerCallContext({ requestedVersion: request.headers.get(A2A_VERSION_HEADER) ?? undefined });
        const refusal = refusalOf(rpc, id, context, card);
        // A notification gets no reply (JSON-RPC 2.0), refused or not. It is carried out for what it
        // changes; a method that only reads does nothing, since its answer would go nowhere.
        if (notification && (refusal || !CHANGES.has(rpc.method))) return noReply(set);
        if (refusal) return refusal;
        const requestLogger = requestLog(log, request);
        // A stream, or a send held for its task's end, ends when its client leaves or its credential
        // stops answering.
        const ended = new AbortController();
        const end = () => ended.abort();
        const credentialChanged = endWhenRevoked({ sql, inboxSignal, log: requestLogger }, agent, request, end);
        // A key that expires while the request is held ends it as a revoked one does; the timer
        // goes with the request (`end` once it is answered, or when its stream closes).
        ended.signal.addEventListener('abort', askAgainAtExpiry(agent.key?.expiresAt ?? null, credentialChanged), { once: true });
        // Held silent up to the send's wait, longer than Bun's idle limit allows by default.
        holdOpen(server, request, config.A2A_SEND_WAIT_MS / 1000);
        const handler = a2aRequestHandler({
          sql,
          inboxSignal,
          log: requestLogger,
          abort: AbortSignal.any([request.signal, ended.signal]),
          credentialChanged,
          holdRequest: () => held.take(agent.id),
          requestId: requestIdOf(request),
          caller: agent,
          recipient,
          card,
          stalledAfterMs: config.STALLED_AFTER_MS,
          idempotencyRetentionMs: config.IDEMPOTENCY_RETENTION_MS,
          // Nobody waits for a notification's answer.
          sendWaitMs: notification ? 0 : config.A2A_SEND_WAIT_MS,
          webhookPolicy: webhookUrlPolicy(config),
          baseUrl: config.PUBLIC_URL?.replace(/\/+$/, '') ?? new URL(request.url).origin,
        });
        // A notification's stream is not opened: its message is sent, as SendMessage sends it.
        const asked = notification && rpc.method === 'SendStreamingMessage' ? { ...rpc, method: 'SendMessage' } : rpc;
        const answer = await new JsonRpcTransportHandler(handler).handle(asked, context).catch((error: unknown) => {
          end();
          throw error;
        });
        if (notification || !(Symbol.asyncIterator in answer)) {
          end();
          return notification ? noReply(set) : answer;
        }
        // A refusal before the stream's first event is answered as any JSON-RPC error is.
        let first: IteratorResult<unknown>;
        try {
          first = await answer.next();
        } catch (error) {
          end();
          return failed(id, error);
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
            void pump(first, answer, sink, id);
            return () => {
              end();
              void answer.return(undefined);
            };
          },
        });
      },
      { agentWithRawBody: true, params: Params, detail: { hide: true } },
    )
    .options('/:username', preflight, { detail: { hide: true } })
    .options('/:username/.well-known/agent-card.json', preflight, { detail: { hide: true } });

// What refuses a request before its method runs: another A2A version, a method A2A does not
// have, params that are not A2A's JSON (params.ts).
function refusalOf(rpc: JsonRpcRequest, id: JsonRpcId, context: ServerCallContext, card: AgentCard): JsonRpcFailure | null {
  try {
    validateVersion(context.requestedVersion, card, 'JSONRPC');
  } catch (error) {
    return failed(id, error);
  }
  // Before the params: the SDK's transport reads a method's params before its name.
  if (!isA2AMethod(rpc.method)) return jsonRpcFailure(id, A2A_ERROR_CODE.METHOD_NOT_FOUND, `Method not found: ${rpc.method} is not a method of A2A 1.0.`);
  const problem = paramsProblem(rpc.method, rpc.params);
  return problem ? failed(id, new RequestMalformedError(problem)) : null;
}

// The methods that change something (CancelTask is always refused here): a notification of any
// other is not carried out.
const CHANGES = new Set(['SendMessage', 'SendStreamingMessage', 'CreateTaskPushNotificationConfig', 'DeleteTaskPushNotificationConfig']);

const failed = (id: JsonRpcId, error: unknown): JsonRpcFailure => ({ jsonrpc: '2.0', id, error: toJsonRpcError(error) });

const noReply = (set: { headers: Record<string, unknown> }) => {
  delete set.headers['content-type'];
  return new Response(null, { status: 204 });
};

// Sends a stream's events as they come, an error as the last of them, then ends it.
async function pump(first: IteratorResult<unknown>, rest: AsyncGenerator<unknown>, sink: EventSink, id: JsonRpcId) {
  if (first.done || !sink.send(formatSSEEvent(first.value))) return sink.finish();
  for (;;) {
    let next: IteratorResult<unknown>;
    try {
      next = await rest.next();
    } catch (error) {
      sink.send(formatSSEEvent(failed(id, error)));
      break;
    }
    if (next.done || !sink.send(formatSSEEvent(next.value))) break;
  }
  sink.finish();
}
