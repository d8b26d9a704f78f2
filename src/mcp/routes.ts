import { Elysia } from 'elysia';
import type { Server } from 'bun';
import type { Config } from '../config';
import type { Agent } from '../domain/agents/actors';
import type { InboxSignal } from '../db/inbox-signal';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import type { SearchGate } from '../domain/shared/search-gate';
import { LIMITS } from '../domain/shared/schemas';
import { withFields, type Logger } from '../log';
import type { Metrics } from '../metrics';
import { agentAuth } from '../web/agent-auth';
import { fail } from '../web/envelope';
import { holdOpen } from '../web/hold-open';
import { countEarlyAnswer } from '../web/metrics';
import { requestLog, traceFields } from '../web/request-id';
import { isLegacyRequest } from '@modelcontextprotocol/server';
import { parseMcpBody } from './answers';
import { methodOf, protocolVersionOf, toolOf, traceparentOf } from './protocol-version';
import { answerMcp2026, listen2026 } from './server-2026';
import { MCP_SCOPE } from '../domain/oauth/oauth-connections';
import { mcpOriginGuard } from './origin-guard';
import { answerMcp, MCP_STREAM_BACKLOG_BYTES, streamMcp } from './server';
import type { ToolContext } from './tools';
import { askAgainAtExpiry, endWhenRevoked, untilCredentialRevoked } from '../web/held-credential';
import type { HeldRequests } from '../web/held-requests';
import { credentialExpiresAt } from '../domain/agents/authentication';

export const NO_OAUTH =
  'This deployment offers no OAuth sign-in (it has no PUBLIC_URL): an MCP client sends the agent key as "Authorization: Bearer agt_…". A 401 from /mcp means that key was missing, malformed, unknown or archived.';

const isMcpPath = (url: string) => {
  const path = url.slice(url.indexOf('/', url.indexOf('//') + 2)).split('?')[0];
  return path === '/mcp';
};

// MCP over Streamable HTTP at /mcp, behind the same Bearer agent key as the HTTP API, or an OAuth
// access token issued for /mcp where OAuth is offered (401 in the usual envelope otherwise).
// Stateless: no session to DELETE. Two protocol versions on one route, told apart by the request
// itself as the SDK's v2 package tells them (isLegacyRequest): a message carrying 2026-07-28's
// _meta envelope is answered by server-2026.ts, anything else by server.ts (2025-11-25 and before).
// GET opens 2025-11-25's stream on which the server tells the client that its inbox resource
// changed; a 2026-07-28 client POSTs subscriptions/listen for that instead. Refusals before any MCP
// message is read (a foreign page, a bad credential, a wrong method) are in the envelope;
// everything after is JSON-RPC.
export const mcpRoutes = (
  sql: Sql,
  inboxSignal: InboxSignal,
  agentCache: AgentCache,
  held: HeldRequests,
  log: Logger,
  config: Config,
  // Where a client learns how to get an access token (the OAuth server's metadata), when OAuth is on.
  oauth: { resource: string; resourceMetadataUrl: string } | null,
  searches: SearchGate,
  metrics: Metrics,
) => {
  const refuseForeign = mcpOriginGuard(config);
  const app = new Elysia({ name: 'mcp-routes' })
    .onRequest(({ request, set }) => {
      if (!isMcpPath(request.url)) return;
      const refusal = refuseForeign(request);
      if (!refusal) return;
      set.status = 403;
      countEarlyAnswer(request, '/mcp', 403);
      return fail(refusal);
    })
  // mcp-remote answers every 401 by starting OAuth and reports only what registration answered;
  // where this deployment offers no OAuth, that answer says what to do instead.
  if (!oauth) {
    app.post(
      '/register',
      ({ set }) => {
        set.status = 404;
        return fail(NO_OAUTH);
      },
      { detail: { hide: true } },
    );
  }
  // Where this request reached us, for the download addresses of files that MCP names.
  const baseUrl = (request: Request) => config.PUBLIC_URL?.replace(/\/+$/, '') ?? new URL(request.url).origin;
  const toolContext = (request: Request, agent: Agent, requestLogger: Logger, abort: AbortSignal): ToolContext => ({
    sql,
    searches,
    held,
    log: requestLogger,
    inboxSignal,
    agent,
    abort,
    idempotencyRetentionMs: config.IDEMPOTENCY_RETENTION_MS,
    stalledAfterMs: config.STALLED_AFTER_MS,
    baseUrl: baseUrl(request),
  });
  const streamLimits = { heartbeatMs: config.EVENT_HEARTBEAT_MS, backlogBytes: MCP_STREAM_BACKLOG_BYTES };
  // A stream that tells an agent its inbox changed (2025-11-25's GET stream, 2026-07-28's
  // subscriptions/listen): `open` is given how to watch the inbox, and the stream ends when the
  // credential it was opened with stops answering (revoked, expired, its agent archived), as every
  // held stream does. It counts as the agent's presence while open.
  const holdInboxStream = async (
    server: Server<unknown> | null,
    request: Request,
    agent: Agent,
    requestLogger: Logger,
    open: (watch: (changed: () => void, end: () => void) => (() => void) | null) => Promise<Response>,
  ) => {
    // Silent between updates, longer than Bun's idle limit allows by default.
    server?.timeout(request, 0);
    const release = held.take(agent.id);
    // Whether the stream was opened: the SDK may refuse the request first (406 to a client that
    // does not accept text/event-stream, a listen request without its filter), and then holds nothing.
    let opened = false;
    try {
      const expiresAt = await credentialExpiresAt(sql, agent, request.headers.get('authorization'), oauth?.resource);
      const response = await open((changed, end) => {
        opened = true;
        const askAgain = endWhenRevoked({ sql, inboxSignal, log: requestLogger }, agent, request, end, oauth?.resource);
        const unwatch = inboxSignal.subscribeEvents(
          agent.id,
          // Stopping wakes every stream: it ends, with no update to tell.
          () => inboxSignal.stopped() || changed(),
          askAgain,
          { receipts: false },
        );
        if (!unwatch) {
          release();
          return null;
        }
        const cancelExpiry = askAgainAtExpiry(expiresAt, askAgain);
        return () => {
          cancelExpiry();
          unwatch();
          release();
        };
      });
      if (!opened) release();
      return response;
    } catch (error) {
      release();
      throw error;
    }
  };
  const challenge = oauth ? { resource: oauth.resource, resourceMetadataUrl: oauth.resourceMetadataUrl, scope: MCP_SCOPE } : undefined;
  return app
    .use(agentAuth(sql, agentCache, challenge))
    .post(
      '/mcp',
      async ({ agent, body, request, server }) => {
        const parsed = parseMcpBody(body as string);
        if ('answer' in parsed) return parsed.answer;
        const { message } = parsed;
        const per2026 = !(await isLegacyRequest(request, message));
        const protocolVersion = protocolVersionOf(request, message, per2026);
        const method = methodOf(message);
        // A trace context in the request's _meta is the MCP call's own; it wins over the header's.
        const requestLogger = withFields(requestLog(log, request), traceFields(traceparentOf(message)));
        metrics.mcpRequest(protocolVersion, method);
        // A line per call is for looking into who speaks what: at debug. The metric counts always.
        requestLogger.debug('mcp_request', { protocolVersion, method, tool: toolOf(message), agent: agent.username });
        if (per2026 && method === 'subscriptions/listen') {
          const ctx = toolContext(request, agent, requestLogger, request.signal);
          return holdInboxStream(server, request, agent, requestLogger, (watch) => listen2026(request, message, ctx, requestLogger, streamLimits, watch));
        }
        holdOpen(server, request, LIMITS.toolInboxWaitSeconds);
        return untilCredentialRevoked({ sql, inboxSignal, log: requestLogger }, agent, request, oauth?.resource, (abort) => {
          const ctx = toolContext(request, agent, requestLogger, abort);
          return per2026 ? answerMcp2026(request, message, ctx, requestLogger) : answerMcp(request, message, ctx, requestLogger);
        });
      },
      { agentWithRawBody: true, detail: { hide: true } },
    )
    .get(
      '/mcp',
      ({ agent, request, server }) => {
        const requestLogger = requestLog(log, request);
        const ctx = toolContext(request, agent, requestLogger, request.signal);
        return holdInboxStream(server, request, agent, requestLogger, (watch) => streamMcp(request, ctx, requestLogger, streamLimits, watch));
      },
      { agent: true, detail: { hide: true } },
    )
    .all(
      '/mcp',
      ({ set }) => {
        set.status = 405;
        set.headers.allow = 'GET, POST';
        return fail('This MCP server is stateless: send JSON-RPC messages with POST.');
      },
      { agent: true, detail: { hide: true } },
    );
};
