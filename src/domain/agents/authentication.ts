import type { AgentCache } from '../../db/agent-cache';
import type { Sql } from '../../db/connect';
import type { Agent } from './actors';
import { DomainError, unauthorized } from '../shared/errors';
import { AGENT_KEY_PATTERN, hashKey } from './keys';
import { accessTokenExpiresAt, authenticateAccessToken } from '../oauth/oauth-connections';

// A key answers for its agent while the agent is not archived. A hit in the cache saves the lookup;
// the database evicts an agent whose answer changes (see src/db/agent-cache.ts). Where OAuth access
// tokens are accepted (only /mcp, the resource they are issued for), any other bearer token is read
// as one of those.
export async function authenticateAgent(
  sql: Sql,
  cache: AgentCache,
  authorization: string | undefined | null,
  accessTokenResource?: string,
): Promise<Agent> {
  const key = bearerToken(authorization);
  if (accessTokenResource && !key.startsWith('agt_')) return authenticateAccessToken(sql, key, accessTokenResource);
  if (!AGENT_KEY_PATTERN.test(key)) throw unauthorized('The API key is malformed: an agent key is agt_ and 43 more letters, digits, - or _; check that it was copied whole.');
  const keyHash = hashKey(key);
  const cacheKey = keyHash.toString('base64');
  const cached = cache.get(cacheKey);
  if (cached) return cached;
  const since = cache.version();
  const [agent] = await sql<Agent[]>`
    select id, username from agents where key_hash = ${keyHash} and archived_at is null`;
  if (!agent) throw unauthorized('The API key is not recognised or its agent is archived.');
  cache.remember(cacheKey, agent, since);
  return agent;
}

function bearerToken(authorization: string | undefined | null): string {
  if (!authorization) throw unauthorized('Authorization header is missing; send "Authorization: Bearer agt_…".');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) throw unauthorized('Authorization header is malformed; expected "Bearer agt_…".');
  return match[1]!;
}

// Whether the credential that authenticated a request still answers for its agent, asked of the
// database and never of the cache: a stream held open asks again whenever the agent changes, and
// ends if not. An OAuth access token (where `accessTokenResource` says they are accepted) is
// looked up again as at authentication.
export async function credentialStillAnswers(sql: Sql, agent: Agent, authorization: string | null, accessTokenResource?: string): Promise<boolean> {
  const key = bearerToken(authorization);
  if (accessTokenResource && !key.startsWith('agt_')) {
    return authenticateAccessToken(sql, key, accessTokenResource).then(
      (current) => current.id === agent.id,
      (error: unknown) => {
        if (error instanceof DomainError && error.kind === 'unauthorized') return false;
        throw error;
      },
    );
  }
  if (!AGENT_KEY_PATTERN.test(key)) return false;
  const [row] = await sql`select 1 from agents where id = ${agent.id} and key_hash = ${hashKey(key)} and archived_at is null`;
  return row !== undefined;
}

// When the credential a stream was opened with stops answering by itself: an OAuth access token's
// expiry (where `accessTokenResource` says they are accepted), or null for an agent key, which
// does not expire. The stream asks credentialStillAnswers again then.
export async function credentialExpiresAt(sql: Sql, authorization: string | null, accessTokenResource?: string): Promise<Date | null> {
  const key = bearerToken(authorization);
  if (!accessTokenResource || key.startsWith('agt_')) return null;
  return accessTokenExpiresAt(sql, key);
}
