import { Elysia } from 'elysia';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { authenticateAgent, type Agent } from '../domain/agents';
import { DomainError } from '../domain/errors';
import { readJsonBody, readTextBody } from './body';

// One lookup per request, whichever hook asks first.
const callers = new WeakMap<Request, Promise<Agent>>();

// RFC 6750: a refused bearer credential names the scheme, and says "invalid_token" when a token
// was sent (an MCP host then shows our sentence rather than guessing at other sign-in methods).
export const bearerChallenge = (request: Request) =>
  request.headers.get('authorization') ? 'Bearer realm="agent-messaging-service", error="invalid_token"' : 'Bearer realm="agent-messaging-service"';

type Set = { headers: Record<string, unknown> };

function caller(sql: Sql, cache: AgentCache, request: Request, set: Set): Promise<Agent> {
  let agent = callers.get(request);
  if (!agent) {
    agent = authenticateAgent(sql, cache, request.headers.get('authorization'));
    callers.set(request, agent);
  }
  return agent.catch((error: unknown) => {
    if (error instanceof DomainError && error.kind === 'unauthorized') set.headers['www-authenticate'] = bearerChallenge(request);
    throw error;
  });
}

// `agent: true` on a route resolves the caller from its Bearer agt_ key. The credential is checked
// in the parse and transform hooks, which run before body parsing and validation, so that a
// caller without a valid key always gets 401 and never learns what a valid request looks like.
// `agentWithRawBody: true` does the same but hands the route the body as text, for a route that
// answers a malformed body in its own protocol (MCP's JSON-RPC parse error).
export const agentAuth = (sql: Sql, cache: AgentCache) => {
  const checked = {
    async transform({ request, set }: { request: Request; set: Set }) {
      await caller(sql, cache, request, set);
    },
    async resolve({ request, set }: { request: Request; set: Set }) {
      return { agent: await caller(sql, cache, request, set) };
    },
  };
  return new Elysia({ name: 'agent-auth' }).macro({
    agent: {
      detail: { security: [{ agentKey: [] }] },
      async parse({ request, set }) {
        await caller(sql, cache, request, set);
        return readJsonBody(request);
      },
      ...checked,
    },
    agentWithRawBody: {
      async parse({ request, set }) {
        await caller(sql, cache, request, set);
        return readTextBody(request);
      },
      ...checked,
    },
  });
};
