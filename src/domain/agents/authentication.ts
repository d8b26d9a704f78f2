import type { AgentCache } from '../../db/agent-cache';
import type { Sql } from '../../db/connect';
import type { Agent } from './actors';
import { DomainError, unauthorized } from '../shared/errors';
import { iso } from '../shared/iso-time';
import { AGENT_KEY_PATTERN, hashKey, keyPrefix } from './keys';
import { accessTokenExpiresAt, authenticateAccessToken } from '../oauth/oauth-connections';

export const UNKNOWN_KEY = 'The API key is not recognised or its agent is archived.';
export const expiredKey = (at: Date) =>
  `The API key expired at ${iso(at)}; call with another of the agent's keys, or ask a person for a new one.`;

// A key answers for its agent while it is neither revoked nor expired and the agent is not
// archived. A hit in the cache saves the lookup; the database evicts an agent whose answer changes
// (see src/db/agent-cache.ts), and an entry lasts no longer than its key. Each use is noted in
// memory, for the key's coarse last use. Where OAuth access tokens are accepted (only /mcp, the
// resource they are issued for), any other bearer token is read as one of those.
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
  if (cached) {
    cache.used(cached.key!.id, keyPrefix(key));
    return cached;
  }
  const since = cache.version();
  const [row] = await sql<{ id: string; username: string; keyId: string; expiresAt: Date | null; expired: boolean }[]>`
    select a.id, a.username, k.id as "keyId", k.expires_at as "expiresAt", k.expires_at <= now() as expired
    from agent_keys k join agents a on a.id = k.agent_id
    where k.key_hash = ${keyHash} and a.archived_at is null`;
  if (!row) throw unauthorized(UNKNOWN_KEY);
  if (row.expired) throw unauthorized(expiredKey(row.expiresAt!));
  const agent: Agent = { id: row.id, username: row.username, key: { id: row.keyId, expiresAt: row.expiresAt } };
  cache.remember(cacheKey, agent, since, row.expiresAt);
  cache.used(row.keyId, keyPrefix(key));
  return agent;
}

function bearerToken(authorization: string | undefined | null): string {
  if (!authorization) throw unauthorized('Authorization header is missing; send "Authorization: Bearer agt_…".');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) throw unauthorized('Authorization header is malformed; expected "Bearer agt_…".');
  return match[1]!;
}

// Whether the credential that authenticated a request still answers for its agent, asked of the
// database and never of the cache: a stream or wait held open asks again whenever the agent
// changes (archived, a key revoked or given another expiry) and when its credential expires, and
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
  const [row] = await sql`
    select 1 from agent_keys k join agents a on a.id = k.agent_id
    where k.key_hash = ${hashKey(key)} and a.id = ${agent.id} and a.archived_at is null and (k.expires_at is null or k.expires_at > now())`;
  return row !== undefined;
}

// When the credential a stream or wait was opened with stops answering by itself: an agent key's
// or an OAuth access token's expiry (where `accessTokenResource` says they are accepted), or null
// when it does not expire. The stream asks credentialStillAnswers again then.
export async function credentialExpiresAt(sql: Sql, agent: Agent, authorization: string | null, accessTokenResource?: string): Promise<Date | null> {
  const key = bearerToken(authorization);
  if (!accessTokenResource || key.startsWith('agt_')) return agent.key?.expiresAt ?? null;
  return accessTokenExpiresAt(sql, key);
}

// Why a held stream or wait's credential no longer answers, as authentication would say it.
export const refusal = (agent: Agent) => {
  const expiresAt = agent.key?.expiresAt;
  return unauthorized(expiresAt && expiresAt.getTime() <= Date.now() ? expiredKey(expiresAt) : UNKNOWN_KEY);
};
