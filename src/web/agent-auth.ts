import { Elysia } from 'elysia';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import type { Agent } from '../domain/agents/actors';
import { authenticateAgent } from '../domain/agents/authentication';
import { DomainError } from '../domain/shared/errors';
import { readJsonBody, readTextBody } from './body';

// One lookup per request, whichever hook asks first.
const callers = new WeakMap<Request, Promise<Agent>>();

// RFC 6750: a refused bearer credential names the scheme, and says "invalid_token" when a token
// was sent. Where OAuth is offered (/mcp with PUBLIC_URL set), it also points to the resource's
// metadata (RFC 9728), where an MCP client finds how to sign in.
export function bearerChallenge(request: Request, oauth?: OAuthChallenge): string {
  const parts = ['realm="agent-messaging-service"'];
  if (oauth) parts.push(`resource_metadata="${oauth.resourceMetadataUrl}"`, `scope="${oauth.scope}"`);
  if (request.headers.get('authorization')) parts.push('error="invalid_token"');
  return `Bearer ${parts.join(', ')}`;
}

// What /mcp accepts besides agent keys: access tokens issued for `resource` (src/oauth).
export type OAuthChallenge = { resource: string; resourceMetadataUrl: string; scope: string };

// The agent a request's credential answered for, when the request asked (presence-seen.ts).
export const authenticatedAgent = (request: Request): Promise<Agent> | undefined => callers.get(request);

type Set = { headers: Record<string, unknown> };

function caller(sql: Sql, cache: AgentCache, request: Request, set: Set, oauth?: OAuthChallenge): Promise<Agent> {
  let agent = callers.get(request);
  if (!agent) {
    agent = authenticateAgent(sql, cache, request.headers.get('authorization'), oauth?.resource);
    callers.set(request, agent);
  }
  return agent.catch((error: unknown) => {
    if (error instanceof DomainError && error.kind === 'unauthorized') set.headers['www-authenticate'] = bearerChallenge(request, oauth);
    throw error;
  });
}

// `agent: true` on a route resolves the caller from its Bearer agt_ key. The credential is checked
// in the parse and transform hooks, which run before body parsing and validation, so that a
// caller without a valid key always gets 401 and never learns what a valid request looks like.
// `agentWithRawBody: true` does the same but hands the route the body as text, for a route that
// answers a malformed body in its own protocol (MCP's JSON-RPC parse error).
// `agentWithStreamedBody: true` leaves the body unread, for a route that streams it (an upload).
// With `oauth` (the MCP door only), OAuth access tokens for its resource are accepted too.
export const agentAuth = (sql: Sql, cache: AgentCache, oauth?: OAuthChallenge) => {
  const checked = {
    async transform({ request, set }: { request: Request; set: Set }) {
      await caller(sql, cache, request, set, oauth);
    },
    async resolve({ request, set }: { request: Request; set: Set }) {
      return { agent: await caller(sql, cache, request, set, oauth) };
    },
  };
  // Elysia keeps one instance of a named plugin: the MCP door's, which differs, has its own name.
  return new Elysia({ name: oauth ? 'agent-auth-oauth' : 'agent-auth' }).macro({
    agent: {
      detail: { security: [{ agentKey: [] }] },
      async parse({ request, set }) {
        await caller(sql, cache, request, set, oauth);
        return readJsonBody(request);
      },
      ...checked,
    },
    agentWithStreamedBody: {
      detail: { security: [{ agentKey: [] }] },
      async parse({ request, set }) {
        await caller(sql, cache, request, set, oauth);
        return null;
      },
      ...checked,
    },
    agentWithRawBody: {
      async parse({ request, set }) {
        await caller(sql, cache, request, set, oauth);
        return readTextBody(request);
      },
      ...checked,
    },
  });
};
