import type { Queries, Sql } from '../../db/connect';
import type { Agent } from './actors';
import { conflict, invalid, notFound } from '../shared/errors';
import { isId } from '../shared/ids';
import { iso } from '../shared/iso-time';
import { validate } from '../shared/validate';
import { NewAgentKey as KeyInput } from '../shared/schemas';
import { recordDecision, type Decider } from '../people/audit';
import { hashKey, keyPrefix, newAgentKey } from './keys';

// The most keys an agent has at once; sql/032_agent_keys.sql keeps it, in the inserting statement.
export const MOST_KEYS = 5;

export type AgentKey = { id: string; name: string; prefix: string | null; createdAt: string; lastUsedAt: string | null; expiresAt: string | null };
export type NewAgentKey = AgentKey & { apiKey: string };

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function expiryOf(raw: string | null | undefined): Date | null {
  if (raw === undefined || raw === null) return null;
  const at = RFC3339.test(raw) ? new Date(raw) : null;
  if (!at || Number.isNaN(at.getTime())) throw invalid('expiresAt must be a date and time with its offset, such as 2027-02-01T00:00:00Z', 'expiresAt');
  if (at.getTime() <= Date.now()) throw invalid('expiresAt must be in the future', 'expiresAt');
  return at;
}

const keyColumns = (sql: Queries) => sql`
  k.id, k.name, k.prefix, k.created_at as "createdAt", k.last_used_at as "lastUsedAt", k.expires_at as "expiresAt"`;

type KeyRow = { id: string; name: string; prefix: string | null; createdAt: Date; lastUsedAt: Date | null; expiresAt: Date | null };
const toKey = (r: KeyRow): AgentKey => ({
  id: r.id,
  name: r.name,
  prefix: r.prefix,
  createdAt: iso(r.createdAt),
  lastUsedAt: r.lastUsedAt && iso(r.lastUsedAt),
  expiresAt: r.expiresAt && iso(r.expiresAt),
});

const noAgent = (username: string) => notFound(`No agent named ${username}.`);
export const NO_SUCH_KEY = 'No such key for this agent.';
export const TOO_MANY_KEYS = `This agent already has ${MOST_KEYS} keys, the most it may have: revoke one before creating another.`;
export const LAST_KEY = "This is the agent's last key that has not expired: create another before revoking it, or archive the agent to shut it out.";
const noKey = () => notFound(NO_SUCH_KEY);
const tooMany = () => conflict(TOO_MANY_KEYS);
const lastKey = () => conflict(LAST_KEY);

async function agentIdNamed(sql: Queries, username: string): Promise<string> {
  const [row] = await sql<{ id: string }[]>`select id from agents where username = ${username}`;
  if (!row) throw noAgent(username);
  return row.id;
}

async function listKeys(sql: Queries, agentId: string): Promise<AgentKey[]> {
  const rows = await sql<KeyRow[]>`select ${keyColumns(sql)} from agent_keys k where k.agent_id = ${agentId} order by k.created_at, k.id`;
  return rows.map(toKey);
}

// The agent's keys, as people see them: archived agents' too (unarchiving restores their keys).
export async function keysOf(sql: Sql, username: string): Promise<AgentKey[]> {
  return listKeys(sql, await agentIdNamed(sql, username));
}

// A new key in the first free place. Two creations at once may both choose the same place: the
// loser's insert breaks the uniqueness of (agent, place) and it chooses again, so the most is kept
// by the database whatever the timing. `record` writes the person's decision in the same transaction.
async function insertKey(sql: Sql, agentId: string, name: string, expiresAt: Date | null, record?: (tx: Queries, key: AgentKey) => Promise<void>) {
  const apiKey = newAgentKey();
  return sql.begin(async (tx) => {
    for (let attempt = 0; ; attempt++) {
      try {
        const [row] = await tx.savepoint((sp) => sp<KeyRow[]>`
          insert into agent_keys as k (agent_id, slot, name, key_hash, prefix, expires_at)
          select ${agentId}, s, ${name}, ${hashKey(apiKey)}, ${keyPrefix(apiKey)}, ${expiresAt}
          from generate_series(1, ${MOST_KEYS}) s
          where s not in (select slot from agent_keys where agent_id = ${agentId})
          order by s limit 1
          returning ${keyColumns(sp)}`);
        if (!row) throw tooMany();
        const key = toKey(row);
        await record?.(tx, key);
        return { ...key, apiKey };
      } catch (error) {
        if (attempt < MOST_KEYS && (error as { code?: string }).code === '23505') continue;
        throw error;
      }
    }
  });
}

// Revokes a key at once: the row goes, and the database tells every instance (its cache, its held
// streams and waits) in the same commit. An agent always keeps one key that has not expired: the
// agent's row is locked first, so that two revocations at once cannot each leave the other's key
// as the last and revoke both.
async function deleteKey(sql: Sql, agentId: string, keyId: string, record?: (tx: Queries, key: AgentKey) => Promise<void>): Promise<AgentKey> {
  if (!isId(keyId)) throw noKey();
  return sql.begin(async (tx) => {
    await tx`select 1 from agents where id = ${agentId} for update`;
    const [row] = await tx<(KeyRow & { others: boolean })[]>`
      select ${keyColumns(tx)},
             exists (select 1 from agent_keys o where o.agent_id = k.agent_id and o.id <> k.id and (o.expires_at is null or o.expires_at > now())) as others
      from agent_keys k where k.id = ${keyId} and k.agent_id = ${agentId}`;
    if (!row) throw noKey();
    if (!row.others) throw lastKey();
    await tx`delete from agent_keys where id = ${keyId}`;
    const key = toKey(row);
    await record?.(tx, key);
    return key;
  });
}

// The agent itself: its own keys, a new one, one revoked (the one it calls with included). These are
// not people's decisions, so the audit trail does not record them; the log names the key by its prefix.
// `current` marks the key the agent called with.
const asOwn = <K extends AgentKey>(agent: Agent, key: K) => ({ ...key, current: key.id === agent.key?.id });

export const ownKeys = async (sql: Sql, agent: Agent) => (await listKeys(sql, agent.id)).map((key) => asOwn(agent, key));

export async function createOwnKey(sql: Sql, agent: Agent, input: unknown) {
  const body = validate(KeyInput, input);
  return asOwn(agent, await insertKey(sql, agent.id, body.name, expiryOf(body.expiresAt)));
}

export const revokeOwnKey = async (sql: Sql, agent: Agent, keyId: string) => asOwn(agent, await deleteKey(sql, agent.id, keyId));

// People, on the dashboard or at the CLI: each decision goes in the audit trail with the key's name
// and prefix, never the key.
export async function createKey(sql: Sql, decider: Decider, username: string, input: unknown): Promise<NewAgentKey> {
  const body = validate(KeyInput, input);
  return insertKey(sql, await agentIdNamed(sql, username), body.name, expiryOf(body.expiresAt), (tx, key) =>
    recordDecision(tx, decider, { action: 'agent.key.create', subjectType: 'agent', subject: username, after: described(key) }),
  );
}

export async function revokeKey(sql: Sql, decider: Decider, username: string, keyId: string): Promise<AgentKey> {
  return deleteKey(sql, await agentIdNamed(sql, username), keyId, (tx, key) =>
    recordDecision(tx, decider, { action: 'agent.key.revoke', subjectType: 'agent', subject: username, before: described(key) }),
  );
}

const described = (key: AgentKey) => ({ key: key.id, name: key.name, prefix: key.prefix, expiresAt: key.expiresAt });
