import type { Queries, Sql } from '../../db/connect';
import type { Actor } from './actors';
import { invalid, notFound, refusedByPolicy } from '../shared/errors';
import { recordDecision, type Decider } from '../people/audit';
import { CONTACT_POLICIES, type ContactPolicyName, type ContactPolicyRecord } from '../shared/schemas';

// Who may put an agent in a thread (docs/guides/govern-agents.md): its contact policy and its allow
// and block lists, which people set. The question is asked only of an agent putting another agent
// in a thread; a person is never bound (docs/internals/decisions.md), and an agent opening a thread
// alone or naming itself asks nobody.

type Refusal = 'blocked' | 'contacts' | 'closed';

const refusal = (username: string, why: Refusal) => {
  switch (why) {
    case 'blocked':
      return refusedByPolicy(`${username} does not accept threads from you: you are on its block list, and only a person can take you off it; nothing was written.`, 'blocked');
    case 'contacts':
      return refusedByPolicy(`${username} accepts threads only from its contacts; ask a person to add you to ${username}'s allow list. Nothing was written.`, 'contact_policy');
    case 'closed':
      return refusedByPolicy(`${username} accepts threads only from people; ask a person to put it in the thread. Nothing was written.`, 'contact_policy');
  }
};

// Why the agent `actorId` may not put the agent `a` (a row of agents in the statement) in a thread,
// or null when it may: the one reading of the rule, for admissions below and for the directory,
// which lists only the agents its caller may reach (directory.ts).
export const refusalBy = (sql: Queries, actorId: string) => sql`case
  when exists (select 1 from agent_contacts c where c.agent_id = a.id and c.contact_id = ${actorId} and c.list = 'block') then 'blocked'
  when a.contact_policy = 'open' then null
  when a.contact_policy = 'closed' then 'closed'
  when exists (select 1 from agent_contacts c where c.agent_id = a.id and c.contact_id = ${actorId} and c.list = 'allow') then null
  when exists (select 1 from participants mine join participants theirs on theirs.thread_id = mine.thread_id
               where mine.agent_id = ${actorId} and theirs.agent_id = a.id) then null
  else 'contacts' end`;

// Refuses, naming the first in the order given, when an agent may not be put in a thread by the
// acting agent; `intoThread`: agents already in that thread are not asked again. Called in the
// transaction that then writes the participants. The targets' rows are locked first, in one
// statement and in id order; every change of a policy or list locks its agent's row before writing
// (lockAgents), so the check, a later statement and thus a later snapshot, sees any change that
// committed before the lock was granted, and a change still to come waits for this transaction.
export async function admitInvitees(tx: Queries, actor: Actor, agentIds: string[], intoThread: string | null = null): Promise<void> {
  if (actor.kind !== 'agent') return;
  const targets = [...new Set(agentIds)].filter((id) => id !== actor.id);
  if (targets.length === 0) return;
  await tx`select 1 from agents where id = any(${targets}::uuid[]) order by id for share`;
  const [refused] = await tx<{ username: string; why: Refusal }[]>`
    select username, why from (
      select t.n, a.username, ${refusalBy(tx, actor.id)} as why
      from unnest(${targets}::uuid[]) with ordinality as t(id, n) join agents a on a.id = t.id
      where not exists (select 1 from participants p where p.thread_id = ${intoThread}::uuid and p.agent_id = a.id)
    ) checked
    where why is not null
    order by n limit 1`;
  if (refused) throw refusal(refused.username, refused.why);
}

// The agent's policy and lists, usernames in alphabetical order.
async function policyOf(sql: Queries, agentId: string): Promise<ContactPolicyRecord> {
  const list = (name: 'allow' | 'block') => sql`
    coalesce((select json_agg(c.username order by c.username) from agent_contacts l join agents c on c.id = l.contact_id
              where l.agent_id = a.id and l.list = ${name}), '[]')`;
  const [row] = await sql<ContactPolicyRecord[]>`
    select a.contact_policy as policy, ${list('allow')} as allow, ${list('block')} as block
    from agents a where a.id = ${agentId}`;
  return row!;
}

// What an agent reads of its own.
export const ownContactPolicy = (sql: Sql, agent: { id: string }) => policyOf(sql, agent.id);

// What a person reads of an agent's.
export async function contactPolicy(sql: Sql, username: string): Promise<ContactPolicyRecord & { username: string }> {
  const [agent] = await sql<{ id: string }[]>`select id from agents where username = ${username}`;
  if (!agent) throw notFound(`No agent named ${username}.`);
  return { username, ...(await policyOf(sql, agent.id)) };
}

// The agent's row, and the contact's when one is named, locked until the change commits, in one
// statement and in id order, so that two changes naming the same two agents wait for each other
// instead of deadlocking: the lock an admission waits on (above). No key update, which an
// admission's share lock waits for, while rows that only refer to the agents (the list entry, a
// participant) are still written meanwhile.
async function lockAgents(tx: Queries, username: string, contact: string | null = null) {
  const rows = await tx<{ id: string; username: string; policy: ContactPolicyName }[]>`
    select id, username, contact_policy as policy from agents where username = any(${[username, contact ?? username]})
    order by id for no key update`;
  const agent = rows.find((r) => r.username === username);
  if (!agent) throw notFound(`No agent named ${username}.`);
  const other = contact === null ? null : rows.find((r) => r.username === contact);
  if (other === undefined) throw notFound(`No agent named ${contact}.`);
  return { agent, other };
}

export async function setContactPolicy(sql: Sql, decider: Decider, username: string, policy: unknown) {
  if (!CONTACT_POLICIES.includes(policy as ContactPolicyName)) throw invalid('policy must be one of open, contacts or closed', 'policy');
  return sql.begin(async (tx) => {
    const { agent } = await lockAgents(tx, username);
    await tx`update agents set contact_policy = ${policy as string} where id = ${agent.id}`;
    await recordDecision(tx, decider, {
      action: 'agent.contact_policy.set',
      subjectType: 'agent',
      subject: username,
      before: { policy: agent.policy },
      after: { policy },
    });
    return { username, ...(await policyOf(tx, agent.id)) };
  });
}

// Puts `contact` on the agent's allow or block list, moving it from the other if it was there.
export async function setContact(sql: Sql, decider: Decider, username: string, contact: string, list: unknown) {
  if (list !== 'allow' && list !== 'block') throw invalid('list must be allow or block', 'list');
  if (contact === username) throw invalid(`An agent is on neither of its own lists; name another agent than ${username}.`, 'contact');
  return sql.begin(async (tx) => {
    const { agent, other } = await lockAgents(tx, username, contact);
    const [row] = await tx<{ before: string | null }[]>`
      with before as (select list from agent_contacts where agent_id = ${agent.id} and contact_id = ${other!.id}),
      written as (
        insert into agent_contacts (agent_id, contact_id, list) values (${agent.id}, ${other!.id}, ${list})
        on conflict (agent_id, contact_id) do update set list = excluded.list, added_at = now()
      )
      select (select list from before) as before`;
    await recordDecision(tx, decider, {
      action: `agent.contacts.${list}`,
      subjectType: 'agent',
      subject: username,
      before: { contact, list: row!.before },
      after: { contact, list },
    });
    return { username, ...(await policyOf(tx, agent.id)) };
  });
}

export async function removeContact(sql: Sql, decider: Decider, username: string, contact: string) {
  return sql.begin(async (tx) => {
    const { agent } = await lockAgents(tx, username);
    const [removed] = await tx<{ list: string }[]>`
      delete from agent_contacts l using agents c
      where l.agent_id = ${agent.id} and l.contact_id = c.id and c.username = ${contact}
      returning l.list`;
    if (!removed) throw notFound(`${contact} is on neither of ${username}'s lists.`);
    await recordDecision(tx, decider, {
      action: 'agent.contacts.remove',
      subjectType: 'agent',
      subject: username,
      before: { contact, list: removed.list },
      after: { contact, list: null },
    });
    return { username, ...(await policyOf(tx, agent.id)) };
  });
}
