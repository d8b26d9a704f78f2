import type { Queries, Sql } from '../../db/connect';
import type { Agent } from '../agents/actors';
import { checkWebhookUrl, type WebhookUrlPolicy } from '../agents/webhook-url';
import { secretsOf, signingSecretColumns, type SigningSecrets } from '../agents/signing-secrets';
import { invalid, notFound } from '../shared/errors';
import { isId } from '../shared/ids';
import { noSuchDelivery, sentTo, type SentDelivery } from './sent-deliveries';

// Where the sender of a message asks to be told that a delivery of it moved on (the A2A door's
// push-notification configurations, docs/reference/a2a.md). The URL is held to the webhook rules (public
// https addresses unless local ones are allowed), checked when it is given and again, resolved
// afresh, at every push. A push is queued by the database in the transaction that moves the
// delivery (sql/022_a2a_push.sql), and sent by the worker (webhooks/push-task.ts).
export type PushConfig = {
  id: string;
  name: string;
  deliveryId: string;
  url: string;
  token: string;
  authScheme: string;
  authCredentials: string;
};

export type NewPushConfig = { name?: string; url: unknown; token?: string; authScheme?: string; authCredentials?: string };
export type CheckedPushConfig = { name: string; url: string; token: string; authScheme: string; authCredentials: string };

// Configurations one delivery may have: a client keeps one or two; a bound keeps a caller from
// making each move of its task cost a thousand requests.
export const PUSH_CONFIGS_PER_DELIVERY = 10;

// The job that sends pushes (sql/022_a2a_push.sql queues it under this name).
export const PUSH_TASK = 'a2a_push';

// What one push says, as the door whose configuration it is writes it: the body and its headers,
// and `status`, which the worker compares with the last push delivered, to send only a change.
export type PushMessage = { status: string; body: string; headers: Record<string, string> };
export type RenderPush = (sent: SentDelivery, config: PushConfig) => PushMessage;

const NAME = /^[\x21-\x7e]{1,64}$/;

// The token and the credentials travel as HTTP header values (X-A2A-Notification-Token,
// Authorization), and a value a header cannot carry would fail every push: RFC 9110's field
// value, printable ASCII with spaces and tabs, and nothing else (no line breaks, no other control
// characters, nothing beyond ASCII, which clients encode as they please).
const HEADER_VALUE = /^[\t\x20-\x7e]{0,1024}$/;

const columns = (sql: Queries) => sql`
  id, name, delivery_id as "deliveryId", url, token, auth_scheme as "authScheme", auth_credentials as "authCredentials"`;

// A configuration as given, checked, before anything is written: a door that saves it with
// something else (a message) checks it first, so that a refusal leaves nothing written.
export async function checkPushConfig(input: NewPushConfig, policy: WebhookUrlPolicy): Promise<CheckedPushConfig> {
  const name = input.name || crypto.randomUUID();
  if (!NAME.test(name)) throw invalid('id must be 1 to 64 printable ASCII characters without spaces', 'id');
  if (typeof input.url !== 'string' || input.url === '') throw invalid('url is required: where to send the notifications', 'url');
  const url = await checkWebhookUrl(input.url, policy, 'url');
  for (const [field, value] of [['token', input.token], ['authentication.scheme', input.authScheme], ['authentication.credentials', input.authCredentials]] as const) {
    if (value !== undefined && !HEADER_VALUE.test(value)) {
      throw invalid(`${field} must be at most 1024 printable ASCII characters (letters, digits, punctuation, spaces): it is sent in an HTTP header`, field);
    }
  }
  return { name, url, token: input.token ?? '', authScheme: input.authScheme ?? '', authCredentials: input.authCredentials ?? '' };
}

// Adds a checked configuration, or replaces the one of the same name. The delivery's row is held
// while its configurations are counted, so that concurrent additions cannot pass the bound
// together. One added after the recipient answered is marked answered (its next push says so).
export async function savePushConfig(sql: Sql, sender: Agent, recipient: Agent, deliveryId: string, config: CheckedPushConfig): Promise<PushConfig> {
  if (!isId(deliveryId)) throw noSuchDelivery();
  return sql.begin(async (tx) => {
    const [delivery] = await tx<{ id: string }[]>`
      select d.id from deliveries d join messages m on m.id = d.message_id
      where d.id = ${deliveryId} and ${sentTo(tx, sender, recipient)}
      for update of d`;
    if (!delivery) throw noSuchDelivery();
    const [row] = await tx<PushConfig[]>`
      insert into a2a_push_configs
        (delivery_id, owner_id, thread_id, recipient_id, message_id, name, url, token, auth_scheme, auth_credentials, answered)
      select d.id, ${sender.id}, d.thread_id, d.recipient_id, d.message_id, ${config.name}, ${config.url}, ${config.token},
             ${config.authScheme}, ${config.authCredentials},
             exists (select 1 from messages r where r.thread_id = d.thread_id and r.sender_agent_id = d.recipient_id and r.id > d.message_id)
      from deliveries d
      where d.id = ${deliveryId}
        and (select count(*) from a2a_push_configs where delivery_id = ${deliveryId} and name <> ${config.name}) < ${PUSH_CONFIGS_PER_DELIVERY}
      on conflict (delivery_id, name) do update
        set url = excluded.url, token = excluded.token, auth_scheme = excluded.auth_scheme,
            auth_credentials = excluded.auth_credentials, pushed = null
      returning ${columns(tx)}`;
    if (!row) throw invalid(`A task has at most ${PUSH_CONFIGS_PER_DELIVERY} push-notification configurations; delete one first.`);
    return row;
  });
}

// The sender's configurations of one delivery to `recipient`, oldest first.
export async function pushConfigs(sql: Sql, sender: Agent, recipient: Agent, deliveryId: string): Promise<PushConfig[]> {
  if (!isId(deliveryId)) throw noSuchDelivery();
  const rows = await sql<(PushConfig & { delivered: boolean })[]>`
    select d.id is not null as delivered, c.*
    from (select 1) one
    left join (deliveries d join messages m on m.id = d.message_id) on d.id = ${deliveryId} and ${sentTo(sql, sender, recipient)}
    left join lateral (select ${columns(sql)} from a2a_push_configs where delivery_id = d.id order by id) c on true`;
  if (!rows[0]?.delivered) throw noSuchDelivery();
  return rows.filter((r) => r.id !== null).map(({ delivered: _, ...config }) => config);
}

export const noSuchConfig = (name: string, deliveryId: string) => notFound(`No push-notification configuration ${name} on task ${deliveryId}.`);

export async function removePushConfig(sql: Sql, sender: Agent, recipient: Agent, deliveryId: string, name: string): Promise<void> {
  if (!isId(deliveryId)) throw noSuchDelivery();
  const removed = await sql`
    delete from a2a_push_configs c using deliveries d join messages m on m.id = d.message_id
    where c.delivery_id = ${deliveryId} and c.name = ${name} and d.id = c.delivery_id and ${sentTo(sql, sender, recipient)}`;
  if (removed.count === 0) {
    await pushConfigs(sql, sender, recipient, deliveryId);
    throw noSuchConfig(name, deliveryId);
  }
}

// What a push job needs: the configuration, who sent the message and to whom, and the sender's
// webhook signing secret when it has one (pushes are signed with it, as its doorbells are).
// `secrets`: the sender's webhook signing secrets, null when it has no webhook.
export type PushToSend = { config: PushConfig & { pushed: string | null }; sender: Agent; recipient: Agent; secrets: SigningSecrets | null };

// Takes a configuration for one push, for `leaseMs` at most: pushes of one configuration are sent
// one at a time, so that an older status cannot arrive after a newer one. Null when it is gone,
// or its sender archived; `busyUntil` while another push to it is being sent (the job is queued
// again for then, and will send whatever the task is by that time).
export async function claimPush(sql: Sql, configId: string, leaseMs: number): Promise<PushToSend | { busyUntil: Date } | null> {
  if (!isId(configId)) return null;
  const [row] = await sql<(PushConfig & { pushed: string | null; senderId: string; sender: string; recipientId: string; recipient: string; secret: string | null; previousSecret: string | null; previousSecretUntil: Date | null })[]>`
    with claimed as (
      update a2a_push_configs set sending_until = now() + ${leaseMs} * interval '1 millisecond'
      where id = ${configId} and (sending_until is null or sending_until < now())
      returning *
    )
    select c.id, c.name, c.delivery_id as "deliveryId", c.url, c.token, c.auth_scheme as "authScheme", c.auth_credentials as "authCredentials",
           c.pushed, s.id as "senderId", s.username as sender, r.id as "recipientId", r.username as recipient, ${signingSecretColumns(sql, 's')}
    from claimed c join agents s on s.id = c.owner_id join agents r on r.id = c.recipient_id
    where s.archived_at is null`;
  if (row) {
    const { senderId, sender, recipientId, recipient, secret, previousSecret, previousSecretUntil, ...config } = row;
    const secrets = secret === null ? null : secretsOf({ secret, previousSecret, previousSecretUntil });
    return { config, sender: { id: senderId, username: sender }, recipient: { id: recipientId, username: recipient }, secrets };
  }
  const [busy] = await sql<{ until: Date }[]>`
    select sending_until as until from a2a_push_configs where id = ${configId} and sending_until >= now()`;
  if (!busy) return null;
  await sql`select a2a_push_jobs(array[${configId}::uuid], ${busy.until})`;
  return { busyUntil: busy.until };
}

// Ends a push: the configuration is free for the next, and what was delivered is recorded (unless
// the configuration was given another URL meanwhile, which has been told nothing yet).
export async function finishPush(sql: Sql, config: PushConfig, delivered: string | null): Promise<void> {
  await sql`
    update a2a_push_configs
    set sending_until = null, pushed = case when ${delivered}::text is not null and url = ${config.url} then ${delivered} else pushed end
    where id = ${config.id}`;
}

// A push that may not go now (its URL is at its cap): the configuration is freed and the push
// queued again for `ms` from now, in one statement.
export async function postponePush(sql: Sql, config: PushConfig, ms: number): Promise<void> {
  await sql`
    with freed as (update a2a_push_configs set sending_until = null where id = ${config.id} returning id)
    select a2a_push_jobs(array(select id from freed), now() + ${ms} * interval '1 millisecond')`;
}
