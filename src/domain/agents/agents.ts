import type { Sql } from '../../db/connect';
import { conflict, notFound } from '../shared/errors';
import { hashKey, newAgentKey, newSigningSecret } from './keys';
import { Username } from '../shared/schemas';
import { claimUsername, usernameOwner } from './usernames';
import { validate } from '../shared/validate';
import { checkWebhookUrl, type WebhookUrlPolicy } from './webhook-url';

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
  const [row] = await sql<{ id: string }[]>`
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
