import type { Queries, Sql } from '../../db/connect';
import type { Agent } from '../agents/actors';
import { checkWebhookUrl, type WebhookUrlPolicy } from '../agents/webhook-url';
import { invalid, notFound } from '../shared/errors';
import { isId } from '../shared/ids';
import type { SentDelivery } from './sent-deliveries';

// Where the sender of a message asks to be told that a delivery of it moved on (the A2A door's
// push-notification configurations, docs/a2a.md). The URL is held to the webhook rules (public
// https addresses unless local ones are allowed), checked when it is given and again, resolved
// afresh, at every push. A push is queued by the database in the transaction that moves the
// delivery (sql/022_a2a_push.sql).
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

// Configurations one delivery may have: a client keeps one or two; a bound keeps a caller from
// making each move of its task cost a thousand requests.
export const PUSH_CONFIGS_PER_DELIVERY = 10;

const NAME = /^[\x21-\x7e]{1,64}$/;
const noSuchDelivery = () => notFound('No such delivery of a message you sent.');

const columns = (sql: Queries) => sql`
  id, name, delivery_id as "deliveryId", url, token, auth_scheme as "authScheme", auth_credentials as "authCredentials"`;

// The delivery of the sender's message to `recipient`, held until the transaction ends.
const heldDelivery = (tx: Queries, sender: Agent, recipient: Agent, deliveryId: string) => tx<{ id: string }[]>`
  select d.id from deliveries d join messages m on m.id = d.message_id
  where d.id = ${deliveryId} and d.recipient_id = ${recipient.id} and m.sender_agent_id = ${sender.id}
  for update of d`;

type CheckedPushConfig = { name: string; url: string; token: string; authScheme: string; authCredentials: string };

// A configuration as given, checked: a door that saves it with something else (a message) checks
// it first, so that a refusal leaves nothing written.
export async function checkPushConfig(input: NewPushConfig, policy: WebhookUrlPolicy): Promise<CheckedPushConfig> {
  const name = input.name || crypto.randomUUID();
  if (!NAME.test(name)) throw invalid('id must be 1 to 64 printable ASCII characters without spaces', 'id');
  if (typeof input.url !== 'string' || input.url === '') throw invalid('url is required: where to send the notifications', 'url');
  const url = await checkWebhookUrl(input.url, policy, 'url');
  for (const [field, value] of [['token', input.token], ['authentication.scheme', input.authScheme], ['authentication.credentials', input.authCredentials]] as const) {
    if (value !== undefined && (value.length > 1024 || /[\r\n\0]/.test(value))) throw invalid(`${field} must be at most 1024 characters on one line`, field);
  }
  return { name, url, token: input.token ?? '', authScheme: input.authScheme ?? '', authCredentials: input.authCredentials ?? '' };
}

// Adds a configuration, or replaces the one of the same name. The delivery's row is held while its
// configurations are counted, so that concurrent additions cannot pass the bound together.
export async function savePushConfig(
  sql: Sql,
  sender: Agent,
  recipient: Agent,
  deliveryId: string,
  input: NewPushConfig | CheckedPushConfig,
  policy: WebhookUrlPolicy,
): Promise<PushConfig> {
  if (!isId(deliveryId)) throw noSuchDelivery();
  const { name, url, token, authScheme, authCredentials } = await checkPushConfig(input, policy);
  return sql.begin(async (tx) => {
    if (!(await heldDelivery(tx, sender, recipient, deliveryId))[0]) throw noSuchDelivery();
    const [row] = await tx<PushConfig[]>`
      insert into a2a_push_configs (delivery_id, owner_id, name, url, token, auth_scheme, auth_credentials)
      select ${deliveryId}, ${sender.id}, ${name}, ${url}, ${token}, ${authScheme}, ${authCredentials}
      where (select count(*) from a2a_push_configs where delivery_id = ${deliveryId} and name <> ${name}) < ${PUSH_CONFIGS_PER_DELIVERY}
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
    left join deliveries d on d.id = ${deliveryId} and d.recipient_id = ${recipient.id}
      and exists (select 1 from messages m where m.id = d.message_id and m.sender_agent_id = ${sender.id})
    left join lateral (select ${columns(sql)} from a2a_push_configs where delivery_id = d.id order by id) c on true`;
  if (!rows[0]?.delivered) throw noSuchDelivery();
  return rows.filter((r) => r.id !== null).map(({ delivered: _, ...config }) => config);
}

export async function removePushConfig(sql: Sql, sender: Agent, recipient: Agent, deliveryId: string, name: string): Promise<void> {
  const configs = await pushConfigs(sql, sender, recipient, deliveryId);
  if (!configs.some((c) => c.name === name)) throw notFound(`No push-notification configuration ${name} on this task.`);
  await sql`delete from a2a_push_configs where delivery_id = ${deliveryId} and name = ${name}`;
}

// The job that sends pushes (sql/022_a2a_push.sql queues it under this name).
export const PUSH_TASK = 'a2a_push';

// What one push says, as the door whose configuration it is writes it: the body and its headers,
// and `status`, which the worker compares with the last push delivered, to send only a change.
export type PushMessage = { status: string; body: string; headers: Record<string, string> };
export type RenderPush = (sent: SentDelivery, config: PushConfig) => PushMessage;

// What a push job needs: the configuration, who sent the message and to whom, and the sender's
// webhook signing secret when it has one (pushes are signed with it, as its doorbells are).
export type PushToSend = { config: PushConfig & { pushed: string | null }; sender: Agent; recipient: Agent; secret: string | null };

export async function pushToSend(sql: Sql, configId: string): Promise<PushToSend | null> {
  if (!isId(configId)) return null;
  const [row] = await sql<(PushConfig & { pushed: string | null; senderId: string; sender: string; recipientId: string; recipient: string; secret: string | null })[]>`
    select c.id, c.name, c.delivery_id as "deliveryId", c.url, c.token, c.auth_scheme as "authScheme", c.auth_credentials as "authCredentials",
           c.pushed, s.id as "senderId", s.username as sender, r.id as "recipientId", r.username as recipient, s.signing_secret as secret
    from a2a_push_configs c
    join agents s on s.id = c.owner_id
    join deliveries d on d.id = c.delivery_id
    join agents r on r.id = d.recipient_id
    where c.id = ${configId} and s.archived_at is null`;
  if (!row) return null;
  const { senderId, sender, recipientId, recipient, secret, ...config } = row;
  return { config, sender: { id: senderId, username: sender }, recipient: { id: recipientId, username: recipient }, secret };
}

// Records what was pushed, unless the configuration was replaced or deleted meanwhile.
export async function recordPushed(sql: Sql, config: PushConfig, pushed: string): Promise<void> {
  await sql`update a2a_push_configs set pushed = ${pushed} where id = ${config.id} and url = ${config.url}`;
}
