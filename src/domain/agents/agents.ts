import type { Queries, Sql } from '../../db/connect';
import type { Agent } from './actors';
import { conflict, invalid, notFound } from '../shared/errors';
import { hashKey, keyPrefix, newAgentKey, newSigningSecret } from './keys';

// The name of the key an agent is created with, as sql/032_agent_keys.sql names the key an agent
// already had.
const FIRST_KEY_NAME = 'initial';
import { Username } from '../shared/schemas';
import { claimUsername, usernameOwner } from './usernames';
import { validate } from '../shared/validate';
import { checkWebhookUrl, type WebhookUrlPolicy } from './webhook-url';
import { recordDecision, type Decider } from '../people/audit';

export type CreatedAgent = { username: string; apiKey: string; webhookUrl?: string; signingSecret?: string };

export async function createAgent(
  sql: Sql,
  decider: Decider,
  input: { username: unknown; webhookUrl?: string | undefined },
  policy: WebhookUrlPolicy,
): Promise<CreatedAgent> {
  const username = validate(Username, input.username, 'username');
  const webhookUrl = input.webhookUrl === undefined ? undefined : await checkWebhookUrl(input.webhookUrl, policy);
  const apiKey = newAgentKey();
  const signingSecret = webhookUrl ? newSigningSecret() : null;
  return sql.begin(async (tx) => {
    const [row] = await tx<{ id: string }[]>`
      with claimed as (${claimUsername(tx, username, 'agent')}),
      agent as (
        insert into agents (username, key_hash, webhook_url, signing_secret, webhook_set_at)
        select username, ${hashKey(apiKey)}, ${webhookUrl ?? null}, ${signingSecret}, ${webhookUrl ? tx`now()` : null}
        from claimed
        returning id
      ), key as (
        insert into agent_keys (agent_id, slot, name, key_hash, prefix)
        select id, 1, ${FIRST_KEY_NAME}, ${hashKey(apiKey)}, ${keyPrefix(apiKey)} from agent
      )
      select id from agent`;
    if (!row) {
      throw conflict(
        (await usernameOwner(tx, username)) === 'person'
          ? `A person is already named ${username}; choose another username.`
          : `An agent named ${username} already exists.`,
      );
    }
    await recordDecision(tx, decider, { action: 'agent.create', subjectType: 'agent', subject: username, after: { webhookUrl: webhookUrl ?? null } });
    return webhookUrl ? { username, apiKey, webhookUrl, signingSecret: signingSecret! } : { username, apiKey };
  });
}

const noAgent = (username: string) => notFound(`No agent named ${username}.`);

// Archiving refuses every key of the agent and removes it from future recipients; unarchiving
// restores the same keys. Every instance's cache of authenticated agents
// drops the agent when the change commits (sql/007_agent_changes_notify.sql).
export async function setArchived(sql: Sql, decider: Decider, username: string, archived: boolean) {
  return sql.begin(async (tx) => {
    const [row] = await tx<{ was: boolean }[]>`
      with agent as (select id, archived_at is not null as was from agents where username = ${username} for update)
      update agents a set archived_at = ${archived ? tx`coalesce(a.archived_at, now())` : null}
      from agent where a.id = agent.id
      returning agent.was`;
    if (!row) throw noAgent(username);
    if (row.was !== archived) {
      await recordDecision(tx, decider, {
        action: archived ? 'agent.archive' : 'agent.unarchive',
        subjectType: 'agent',
        subject: username,
        before: { archived: row.was },
        after: { archived },
      });
    }
    return { username, archived };
  });
}

// A webhook saved again or removed is another endpoint: the old one's health and its switching
// off go with it, in the same statement (endpoint-health.ts).
const forgetEndpoint = (sql: Queries, username: string) => sql`
  health as (delete from endpoint_health where agent_id = (select id from agents where username = ${username})),
  windows as (delete from endpoint_attempt_windows where agent_id = (select id from agents where username = ${username}))`;

// The webhook's URL changes (to null: removed), and the decision is recorded with the URL it had;
// the signing secret is never recorded. A secret a rotation replaced stops signing with it.
async function changeWebhook(sql: Sql, decider: Decider, username: string, change: { action: string; url: string | null; secret: string | null }) {
  await sql.begin(async (tx) => {
    const [row] = await tx<{ before: string | null }[]>`
      with agent as (select id, webhook_url from agents where username = ${username} for update), ${forgetEndpoint(tx, username)}
      update agents a set webhook_url = ${change.url}, signing_secret = ${change.secret}, webhook_set_at = ${change.url ? tx`now()` : null},
                          previous_signing_secret = null, previous_signing_secret_until = null, signing_secret_rotated_at = null,
                          webhook_disabled_at = null, webhook_disabled_reason = null, webhook_failing_since = null,
                          webhook_paused_by = null, webhook_resumed_at = null
      from agent where a.id = agent.id
      returning agent.webhook_url as before`;
    if (!row) throw noAgent(username);
    await recordDecision(tx, decider, {
      action: change.action,
      subjectType: 'agent',
      subject: username,
      before: { webhookUrl: row.before },
      after: { webhookUrl: change.url },
    });
  });
}

// Saving a URL always mints a new secret, for a new endpoint; rotating the secret alone keeps the
// endpoint (signing-secrets.ts).
export async function setWebhook(sql: Sql, decider: Decider, username: string, url: string, policy: WebhookUrlPolicy) {
  const webhookUrl = await checkWebhookUrl(url, policy);
  const signingSecret = newSigningSecret();
  await changeWebhook(sql, decider, username, { action: 'agent.webhook.set', url: webhookUrl, secret: signingSecret });
  return { username, webhookUrl, signingSecret };
}

// The secret is discarded for good; the agent goes back to polling.
export async function removeWebhook(sql: Sql, decider: Decider, username: string) {
  await changeWebhook(sql, decider, username, { action: 'agent.webhook.remove', url: null, secret: null });
  return { username, webhookUrl: null };
}

// An agent by name that others can reach, or null: an archived one is not there for them.
export async function activeAgent(sql: Sql, username: string): Promise<Agent | null> {
  const [agent] = await sql<Agent[]>`select id, username from agents where username = ${username} and archived_at is null`;
  return agent ?? null;
}

export async function activeAgentNamed(sql: Sql, username: string): Promise<Agent> {
  const agent = await activeAgent(sql, username);
  if (!agent) throw notFound(`No agent named ${username}.`);
  return agent;
}

// Whether the agent's A2A card is served to anyone (docs/reference/a2a.md), as a person sets it.
export async function setCardListed(sql: Sql, decider: Decider, username: string, listed: unknown) {
  if (typeof listed !== 'boolean') throw invalid('listed must be true or false', 'listed');
  return sql.begin(async (tx) => {
    const [row] = await tx<{ username: string; listed: boolean; was: boolean }[]>`
      with agent as (select id, a2a_card_listed as was from agents where username = ${username} for update)
      update agents a set a2a_card_listed = ${listed} from agent where a.id = agent.id
      returning a.username, a.a2a_card_listed as listed, agent.was`;
    if (!row) throw noAgent(username);
    if (row.was !== listed) {
      await recordDecision(tx, decider, { action: 'agent.a2a_card.set', subjectType: 'agent', subject: username, before: { listed: row.was }, after: { listed } });
    }
    return { username: row.username, listed: row.listed };
  });
}

// An active agent whose card its owner chose to list, or null.
export async function listedAgent(sql: Sql, username: string): Promise<Agent | null> {
  const [agent] = await sql<Agent[]>`
    select id, username from agents where username = ${username} and archived_at is null and a2a_card_listed`;
  return agent ?? null;
}
