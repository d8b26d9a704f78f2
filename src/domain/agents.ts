import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { conflict, notFound, unauthorized } from './errors';
import { AGENT_KEY_PATTERN, hashKey, newAgentKey, newSigningSecret } from './keys';
import { authenticateAccessToken } from './oauth-connections';
import { Username } from './schemas';
import { claimUsername, usernameOwner } from './usernames';
import { validate } from './validate';
import { checkWebhookUrl, type WebhookUrlPolicy } from './webhook-url';

export type Agent = { id: string; username: string };

// Who is acting: an agent with its key, or a person signed in to the dashboard.
export type Actor = { kind: 'agent'; id: string; username: string } | { kind: 'person'; id: string; username: string };

export const asActor = (agent: Agent): Actor => ({ kind: 'agent', id: agent.id, username: agent.username });

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
  if (!authorization) throw unauthorized('Authorization header is missing; send "Authorization: Bearer agt_…".');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) throw unauthorized('Authorization header is malformed; expected "Bearer agt_…".');
  const key = match[1]!;
  if (accessTokenResource && !key.startsWith('agt_')) return authenticateAccessToken(sql, key, accessTokenResource);
  if (!AGENT_KEY_PATTERN.test(key)) throw unauthorized('The API key is malformed; agent keys start with agt_.');
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

export type CreatedAgent = { username: string; apiKey: string; webhookUrl?: string; signingSecret?: string };

export async function createAgent(
  sql: Sql,
  input: { username: unknown; webhookUrl?: string | undefined },
  policy: WebhookUrlPolicy,
): Promise<CreatedAgent> {
  const username = validate(Username, input.username, 'username');
  const webhookUrl = input.webhookUrl === undefined ? undefined : await checkWebhookUrl(input.webhookUrl, policy);
  const apiKey = newAgentKey();
  const signingSecret = webhookUrl ? newSigningSecret() : null;
  const [row] = await sql`
    with claimed as (${claimUsername(sql, username, 'agent')})
    insert into agents (username, key_hash, webhook_url, signing_secret, webhook_set_at)
    select username, ${hashKey(apiKey)}, ${webhookUrl ?? null}, ${signingSecret}, ${webhookUrl ? sql`now()` : null}
    from claimed
    returning id`;
  if (!row) {
    throw conflict(
      (await usernameOwner(sql, username)) === 'person'
        ? `A person is already named ${username}; choose another username.`
        : `An agent named ${username} already exists.`,
    );
  }
  return webhookUrl ? { username, apiKey, webhookUrl, signingSecret: signingSecret! } : { username, apiKey };
}

async function requireAgent(sql: Sql, username: string): Promise<{ id: string; username: string }> {
  const [agent] = await sql<{ id: string; username: string }[]>`select id, username from agents where username = ${username}`;
  if (!agent) throw notFound(`No agent named ${username}.`);
  return agent;
}

// Archiving revokes the key and removes the agent from future recipients; unarchiving restores
// the same key, since the hash never changes. Every instance's cache of authenticated agents
// drops the agent when the change commits (sql/007_agent_changes_notify.sql).
export async function setArchived(sql: Sql, username: string, archived: boolean) {
  await requireAgent(sql, username);
  await sql`
    update agents set archived_at = ${archived ? sql`coalesce(archived_at, now())` : null}
    where username = ${username}`;
  return { username, archived };
}

// Saving a URL always mints a new secret: there is no rotation, only remove and re-add.
export async function setWebhook(sql: Sql, username: string, url: string, policy: WebhookUrlPolicy) {
  const webhookUrl = await checkWebhookUrl(url, policy);
  await requireAgent(sql, username);
  const signingSecret = newSigningSecret();
  await sql`
    update agents set webhook_url = ${webhookUrl}, signing_secret = ${signingSecret}, webhook_set_at = now()
    where username = ${username}`;
  return { username, webhookUrl, signingSecret };
}

// The secret is discarded for good; the agent goes back to polling.
export async function removeWebhook(sql: Sql, username: string) {
  await requireAgent(sql, username);
  await sql`
    update agents set webhook_url = null, signing_secret = null, webhook_set_at = null
    where username = ${username}`;
  return { username, webhookUrl: null };
}
