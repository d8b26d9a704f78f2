import { Elysia } from 'elysia';
import type { Config } from '../config';
import type { InboxSignal } from '../db/inbox-signal';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import type { SearchGate } from '../domain/shared/search-gate';
import { LIMITS } from '../domain/shared/schemas';
import type { Logger } from '../log';
import { agentAuth } from '../web/agent-auth';
import { fail } from '../web/envelope';
import { holdOpen } from '../web/hold-open';
import { countEarlyAnswer } from '../web/metrics';
import { requestLog } from '../web/request-id';
import { MCP_SCOPE } from '../domain/oauth/oauth-connections';
import { mcpOriginGuard } from './origin-guard';
import { answerMcp, MCP_STREAM_BACKLOG_BYTES, streamMcp } from './server';
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
// Stateless: no session to DELETE. GET opens the stream on which the server tells the client that
// its inbox resource changed (server.ts). Refusals before any MCP message is read (a foreign page,
// a bad credential, a wrong method) are in the envelope; everything after is JSON-RPC.
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
  const baseUrl = (request: Request) => config.PUBLIC_URL?.replace(/\/+$/, '') ?? new URL(request.url).origin;
  const challenge = oauth ? { resource: oauth.resource, resourceMetadataUrl: oauth.resourceMetadataUrl, scope: MCP_SCOPE } : undefined;
  return app
    .use(agentAuth(sql, agentCache, challenge))
    .post(
      '/mcp',
      ({ agent, body, request, server }) => {
        holdOpen(server, request, LIMITS.toolInboxWaitSeconds);
        const requestLogger = requestLog(log, request);
        return untilCredentialRevoked({ sql, inboxSignal, log: requestLogger }, agent, request, oauth?.resource, (abort) => {
          const ctx = { sql, searches, held, log: requestLogger, inboxSignal, agent, abort, idempotencyRetentionMs: config.IDEMPOTENCY_RETENTION_MS, stalledAfterMs: config.STALLED_AFTER_MS, baseUrl: baseUrl(request) };
          return answerMcp(request, body as string, ctx, requestLogger);
        });
      },
      { agentWithRawBody: true, detail: { hide: true } },
    )
    .get(
      '/mcp',
      async ({ agent, request, server }) => {
        // Silent between updates, longer than Bun's idle limit allows by default.
        server?.timeout(request, 0);
        const requestLogger = requestLog(log, request);
        const ctx = { sql, searches, held, log: requestLogger, inboxSignal, agent, abort: request.signal, idempotencyRetentionMs: config.IDEMPOTENCY_RETENTION_MS, stalledAfterMs: config.STALLED_AFTER_MS, baseUrl: baseUrl(request) };
        const release = held.take(agent.id);
        // Whether the stream was opened: the transport may refuse the request first (406 to a
        // client that does not accept text/event-stream), and then holds nothing.
        let opened = false;
        try {
          const expiresAt = await credentialExpiresAt(sql, agent, request.headers.get('authorization'), oauth?.resource);
          const response = await streamMcp(request, ctx, requestLogger, { heartbeatMs: config.EVENT_HEARTBEAT_MS, backlogBytes: MCP_STREAM_BACKLOG_BYTES }, (changed, end) => {
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
