import type { Queries, Sql } from '../../db/connect';
import { conflict, invalid, notFound } from '../shared/errors';
import { iso } from '../shared/iso-time';
import { recordDecision, type Decider } from '../people/audit';
import { newSigningSecret } from './keys';

// What signs an agent's doorbells, test events and A2A pushes: its current secret and, while a
// rotation's grace lasts, the secret that one replaced (until `previousUntil`). The signer
// (deliveries/doorbell-signature.ts) holds each attempt's time against `previousUntil`, so the
// grace ends on time with no job to end it, for retries too.
export type SigningSecrets = { current: string; previous: string | null; previousUntil: Date | null };

const MAX_GRACE_MS = 7 * 86_400_000;
const GRACE = /^(\d{1,6})([mhd])$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

// A grace as a person writes it: `0`, or a whole number of minutes, hours or days (90m, 24h, 7d),
// at most 7 days; left out, the deployment's default (WEBHOOK_SECRET_GRACE_MS).
export function graceMs(raw: unknown, defaultMs: number): number {
  if (raw === undefined || raw === null || raw === '') return defaultMs;
  const text = typeof raw === 'string' ? raw.trim() : '';
  const match = GRACE.exec(text);
  const ms = text === '0' ? 0 : match ? Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS] : null;
  if (ms === null || ms > MAX_GRACE_MS) throw invalid('grace must be 0 or a duration of at most 7 days such as 90m, 24h or 7d', 'grace');
  return ms;
}

// Whether the agent `agent`'s replaced secret still signs, by the database's clock. Only a
// rotation of the webhook as it is counts: a webhook saved since (by a release that knew nothing
// of rotation, which leaves the columns as they were) starts with its one new secret.
const inGrace = (sql: Queries, agent: string) =>
  sql`(${sql(agent)}.previous_signing_secret_until > now() and ${sql(agent)}.signing_secret_rotated_at >= ${sql(agent)}.webhook_set_at)`;

// When the agent `agent`'s replaced secret stops signing, or null when none does.
export const previousSecretUntil = (sql: Queries, agent: string) =>
  sql`case when ${inGrace(sql, agent)} then ${sql(agent)}.previous_signing_secret_until end`;

// The agent `agent`'s signing secrets as columns that secretsOf reads.
export const signingSecretColumns = (sql: Queries, agent: string) => sql`
  ${sql(agent)}.signing_secret as secret,
  case when ${inGrace(sql, agent)} then ${sql(agent)}.previous_signing_secret end as "previousSecret",
  ${previousSecretUntil(sql, agent)} as "previousSecretUntil"`;
export type SecretColumns = { secret: string; previousSecret: string | null; previousSecretUntil: Date | null };
export const secretsOf = (row: SecretColumns): SigningSecrets => ({ current: row.secret, previous: row.previousSecret, previousUntil: row.previousSecretUntil });

// Tells a worker that its cached secrets of a webhook are stale: a rotation keeps the webhook's
// version (notify-jobs.ts webhookVersion), and with it the endpoint's health and pending doorbells.
export const secretVersion = (sql: Queries, agent: string) =>
  sql`coalesce((extract(epoch from ${sql(agent)}.signing_secret_rotated_at) * 1000000)::bigint::text, '')`;

export type RotatedSecret = { username: string; webhookUrl: string; signingSecret: string; previousSecretExpiresAt: string | null };

// A person replaces the webhook's signing secret without changing the endpoint. The new secret
// signs at once; the one it replaces signs beside it for `grace` (none: it stops at once). A
// rotation during another's grace drops the oldest secret at once, so that at most two ever
// sign. One statement, under the agent's row lock. The decision is recorded with the grace and
// its end, never a secret.
export async function rotateSigningSecret(sql: Sql, decider: Decider, username: string, grace: unknown, defaultGraceMs: number): Promise<RotatedSecret> {
  const ms = graceMs(grace, defaultGraceMs);
  const signingSecret = newSigningSecret();
  return sql.begin(async (tx) => {
    const [row] = await tx<{ webhookUrl: string | null; until: Date | null; dropped: Date | null }[]>`
      with agent as (
        select id, webhook_url, signing_secret, ${previousSecretUntil(tx, 'agents')} as dropped
        from agents where username = ${username} for update
      ), rotated as (
        update agents a
        set previous_signing_secret = case when ${ms} > 0 then agent.signing_secret end,
            previous_signing_secret_until = case when ${ms} > 0 then now() + ${ms} * interval '1 millisecond' end,
            signing_secret = ${signingSecret}, signing_secret_rotated_at = now()
        from agent where a.id = agent.id and agent.webhook_url is not null
        returning a.previous_signing_secret_until as until
      )
      select agent.webhook_url as "webhookUrl", rotated.until, agent.dropped from agent left join rotated on true`;
    if (!row) throw notFound(`No agent named ${username}.`);
    if (!row.webhookUrl) throw conflict(`${username} has no webhook, so it has no signing secret to rotate.`);
    const previousSecretExpiresAt = iso(row.until);
    await recordDecision(tx, decider, {
      action: 'agent.webhook.secret.rotate',
      subjectType: 'agent',
      subject: username,
      before: { previousSecretExpiresAt: iso(row.dropped) },
      after: { graceMs: ms, previousSecretExpiresAt },
    });
    return { username, webhookUrl: row.webhookUrl, signingSecret, previousSecretExpiresAt };
  });
}
