import { Elysia } from 'elysia';
import type { InboxSignal } from '../db/inbox-signal';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { LIMITS } from '../domain/schemas';
import type { Logger } from '../log';
import { agentAuth } from '../http/agent-auth';
import { fail } from '../http/envelope';
import { holdOpen } from '../http/hold-open';
import { requestLog } from '../http/request-id';
import { answerMcp } from './server';

// MCP over Streamable HTTP at /mcp, behind the same Bearer agent key as the HTTP API (401 in the
// usual envelope otherwise). Stateless: there is no session stream to GET or session to DELETE.
export const mcpRoutes = (sql: Sql, inboxSignal: InboxSignal, agentCache: AgentCache, log: Logger) =>
  new Elysia({ name: 'mcp-routes' })
    .use(agentAuth(sql, agentCache))
    .post(
      '/mcp',
      ({ agent, body, request, server }) => {
        holdOpen(server, request, LIMITS.inboxWaitSeconds);
        const requestLogger = requestLog(log, request);
        return answerMcp(request, body, { sql, log: requestLogger, inboxSignal, agent, abort: request.signal }, requestLogger);
      },
      { agent: true, detail: { hide: true } },
    )
    .all(
      '/mcp',
      ({ set }) => {
        set.status = 405;
        set.headers.allow = 'POST';
        return fail('This MCP server is stateless: send JSON-RPC messages with POST.');
      },
      { agent: true, detail: { hide: true } },
    );
