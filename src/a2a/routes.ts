import { AgentCard, A2A_VERSION_HEADER } from '@a2a-js/sdk';
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from '@a2a-js/sdk/server';
import { A2A_ERROR_CODE, toJsonRpcError } from '@a2a-js/sdk/errors';
import { Elysia, t } from 'elysia';
import type { Config } from '../config';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { activeAgentNamed } from '../domain/agents/agents';
import type { Logger } from '../log';
import { agentAuth } from '../web/agent-auth';
import { requestIdOf, requestLog } from '../web/request-id';
import { A2A_VERSION, agentCard } from './agent-card';
import { a2aRequestHandler } from './request-handler';

const Params = t.Object({ username: t.String() });

// The public address of this service, which the card names: PUBLIC_URL, or the one asked.
const originOf = (request: Request, config: Config) => (config.PUBLIC_URL ? new URL(config.PUBLIC_URL).origin : new URL(request.url).origin);

// A2A (docs/a2a.md): each active agent is reached at /a2a/agents/{username}, JSON-RPC 2.0 over
// POST, and described by its card below that address. Both need the caller's own agent key: the
// card is served to agents of this service only, so that no stranger learns which names exist.
// Refusals before the JSON-RPC request is read (no key: 401, no such agent: 404) are in the
// service's envelope; everything after is JSON-RPC, in the SDK's transport.
export const a2aRoutes = (sql: Sql, agentCache: AgentCache, log: Logger, config: Config) =>
  new Elysia({ name: 'a2a-routes', prefix: '/a2a/agents' })
    .use(agentAuth(sql, agentCache))
    .get(
      '/:username/.well-known/agent-card.json',
      async ({ params, request }) => AgentCard.toJSON(agentCard(originOf(request, config), (await activeAgentNamed(sql, params.username)).username)),
      { agent: true, params: Params, detail: { hide: true } },
    )
    .post(
      '/:username',
      async ({ agent, params, body, request, set }) => {
        const recipient = await activeAgentNamed(sql, params.username);
        const card = agentCard(originOf(request, config), recipient.username);
        const context = new ServerCallContext({ requestedVersion: request.headers.get(A2A_VERSION_HEADER) ?? undefined });
        set.headers['content-type'] = 'application/json';
        try {
          validateVersion(context.requestedVersion, card, 'JSONRPC');
        } catch (error) {
          return { jsonrpc: '2.0', id: idOf(body), error: toJsonRpcError(error) };
        }
        const handler = a2aRequestHandler({
          sql,
          log: requestLog(log, request),
          requestId: requestIdOf(request),
          caller: agent,
          recipient,
          card,
          stalledAfterMs: config.STALLED_AFTER_MS,
          idempotencyRetentionMs: config.IDEMPOTENCY_RETENTION_MS,
        });
        const answer = await new JsonRpcTransportHandler(handler).handle(body as string, context);
        if (!(Symbol.asyncIterator in answer)) return unreadParams(answer, body);
        // Streaming is not offered (the card says so): the stream's first item is its refusal.
        try {
          await answer.next();
          return { jsonrpc: '2.0', id: idOf(body), error: { code: -32603, message: 'The stream ended before it began.' } };
        } catch (error) {
          return { jsonrpc: '2.0', id: idOf(body), error: toJsonRpcError(error) };
        }
      },
      { agentWithRawBody: true, params: Params, detail: { hide: true } },
    );

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
