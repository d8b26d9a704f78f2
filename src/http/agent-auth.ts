import { Elysia } from 'elysia';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { authenticateAgent, type Agent } from '../domain/agents';
import { readJsonBody } from './body';

// One lookup per request, whichever hook asks first.
const callers = new WeakMap<Request, Promise<Agent>>();

function caller(sql: Sql, cache: AgentCache, request: Request): Promise<Agent> {
  let agent = callers.get(request);
  if (!agent) {
    agent = authenticateAgent(sql, cache, request.headers.get('authorization'));
    callers.set(request, agent);
  }
  return agent;
}

// `agent: true` on a route resolves the caller from its Bearer agt_ key. The credential is checked
// in the parse and transform hooks, which run before body parsing and validation, so that a
// caller without a valid key always gets 401 and never learns what a valid request looks like.
export const agentAuth = (sql: Sql, cache: AgentCache) =>
  new Elysia({ name: 'agent-auth' }).macro({
    agent: {
      detail: { security: [{ agentKey: [] }] },
      async parse({ request }) {
        await caller(sql, cache, request);
        return readJsonBody(request);
      },
      async transform({ request }) {
        await caller(sql, cache, request);
      },
      async resolve({ request }) {
        return { agent: await caller(sql, cache, request) };
      },
    },
  });
