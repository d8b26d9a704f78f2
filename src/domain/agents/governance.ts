import type { Config } from '../../config';
import type { Sql } from '../../db/connect';
import { recordDecision, type Decider } from '../people/audit';
import { invalid, notFound } from '../shared/errors';

// What people set about one agent's sending (docs/guides/govern-agents.md): its own send quotas,
// which replace the deployment's defaults, and whether every message it sends waits for a person.
// The post path enforces them; this is where people read and change them, each change recorded in
// the audit trail in the transaction that makes it.

export type SendQuotas = { messagesPerMinute: number | null; threadsPerHour: number | null };

export type AgentGovernance = SendQuotas & {
  username: string;
  contactPolicy: 'open' | 'contacts' | 'closed';
  holdsMessages: boolean;
  // What a null quota means: the deployment's setting (0: no quota).
  defaults: { messagesPerMinute: number; threadsPerHour: number };
};

type QuotaDefaults = Pick<Config, 'SEND_MESSAGES_PER_MINUTE' | 'SEND_THREADS_PER_HOUR'>;

export async function agentGovernance(sql: Sql, username: string, config: QuotaDefaults): Promise<AgentGovernance> {
  const [row] = await sql<Omit<AgentGovernance, 'defaults'>[]>`
    select username, contact_policy as "contactPolicy", holds_messages as "holdsMessages",
           messages_per_minute as "messagesPerMinute", threads_per_hour as "threadsPerHour"
    from agents where username = ${username}`;
  if (!row) throw notFound(`No agent named ${username}.`);
  return { ...row, defaults: { messagesPerMinute: config.SEND_MESSAGES_PER_MINUTE, threadsPerHour: config.SEND_THREADS_PER_HOUR } };
}

// The columns are PostgreSQL integers.
const MAX_QUOTA = 2_147_483_647;

// undefined: leave it as it is; null: back to the deployment's default.
function quotaOf(value: unknown, field: keyof SendQuotas): number | null | undefined {
  if (value === undefined || value === null) return value;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_QUOTA) {
    throw invalid(`${field} must be a whole number from 1 to ${MAX_QUOTA}, or null for the deployment's default`, field);
  }
  return value;
}

const sameQuotas = (a: SendQuotas, b: SendQuotas) => a.messagesPerMinute === b.messagesPerMinute && a.threadsPerHour === b.threadsPerHour;

// Either quota, or both; one left out stays as it is. A setting saved unchanged decides nothing and
// records nothing.
export async function setSendQuotas(sql: Sql, decider: Decider, username: string, input: unknown): Promise<SendQuotas & { username: string }> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw invalid('body must be a JSON object');
  const given = input as Record<string, unknown>;
  const messagesPerMinute = quotaOf(given.messagesPerMinute, 'messagesPerMinute');
  const threadsPerHour = quotaOf(given.threadsPerHour, 'threadsPerHour');
  if (messagesPerMinute === undefined && threadsPerHour === undefined) {
    throw invalid("Give messagesPerMinute, threadsPerHour or both: a whole number, or null for the deployment's default.");
  }
  return sql.begin(async (tx) => {
    const [before] = await tx<(SendQuotas & { id: string })[]>`
      select id, messages_per_minute as "messagesPerMinute", threads_per_hour as "threadsPerHour"
      from agents where username = ${username} for update`;
    if (!before) throw notFound(`No agent named ${username}.`);
    const was = { messagesPerMinute: before.messagesPerMinute, threadsPerHour: before.threadsPerHour };
    const after = {
      messagesPerMinute: messagesPerMinute === undefined ? was.messagesPerMinute : messagesPerMinute,
      threadsPerHour: threadsPerHour === undefined ? was.threadsPerHour : threadsPerHour,
    };
    if (!sameQuotas(was, after)) {
      await tx`
        update agents set messages_per_minute = ${after.messagesPerMinute}, threads_per_hour = ${after.threadsPerHour}
        where id = ${before.id}`;
      await recordDecision(tx, decider, { action: 'agent.quotas.set', subjectType: 'agent', subject: username, before: was, after });
    }
    return { username, ...after };
  });
}

// Every message the agent sends from now on waits for a person; what it sent before is not touched.
export async function setAgentHolds(sql: Sql, decider: Decider, username: string, holds: unknown): Promise<{ username: string; holdsMessages: boolean }> {
  if (typeof holds !== 'boolean') throw invalid('holds must be true or false', 'holds');
  return sql.begin(async (tx) => {
    const [before] = await tx<{ id: string; holdsMessages: boolean }[]>`
      select id, holds_messages as "holdsMessages" from agents where username = ${username} for update`;
    if (!before) throw notFound(`No agent named ${username}.`);
    if (before.holdsMessages !== holds) {
      await tx`update agents set holds_messages = ${holds} where id = ${before.id}`;
      await recordDecision(tx, decider, {
        action: 'agent.holds.set',
        subjectType: 'agent',
        subject: username,
        before: { holdsMessages: before.holdsMessages },
        after: { holdsMessages: holds },
      });
    }
    return { username, holdsMessages: holds };
  });
}
