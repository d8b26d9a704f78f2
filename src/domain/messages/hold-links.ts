import { createHash, randomBytes } from 'node:crypto';
import type { Sql } from '../../db/connect';
import type { Person } from '../people/people';

// One-time links to a waiting message's decision, for the emails that tell people what waits
// (sql/028_hold_links.sql). A link does not sign anyone in: the dashboard asks for a session first,
// and the link is then spent for the person it was made for, and only while its message waits.
export const HOLD_LINK_PATH = '/dashboard/holds/link';

const hashOf = (token: string) => createHash('sha256').update(token).digest();

export type HoldLinks = { email: string; links: Map<string, string> };

// A fresh token per person and message: every person's own links to `messageIds`, as paths.
export async function mintHoldLinks(sql: Sql, messageIds: string[]): Promise<HoldLinks[]> {
  const people = await sql<{ id: string; email: string }[]>`select id, email from people order by email`;
  if (people.length === 0 || messageIds.length === 0) return people.map((p) => ({ email: p.email, links: new Map() }));
  const rows = people.flatMap((p) => messageIds.map((m) => ({ person: p, message: m, token: randomBytes(24).toString('base64url') })));
  await sql`
    insert into hold_links (token_hash, message_id, person_id, expires_at)
    select decode(l.token_hash, 'hex'), h.id, l.person_id, h.expires_at
    from unnest(${rows.map((r) => hashOf(r.token).toString('hex'))}::text[], ${rows.map((r) => r.message)}::uuid[], ${rows.map((r) => r.person.id)}::uuid[])
         as l(token_hash, message_id, person_id)
    join held_messages h on h.id = l.message_id and h.state = 'held'`;
  return people.map((p) => ({
    email: p.email,
    links: new Map(rows.filter((r) => r.person.id === p.id).map((r) => [r.message, `${HOLD_LINK_PATH}/${r.token}`])),
  }));
}

// Spends the link for `person` in one statement: the waiting message it names, or null when the
// token is unknown, another person's, used before, expired, or its message no longer waits.
export async function redeemHoldLink(sql: Sql, person: Person, token: string): Promise<string | null> {
  if (!/^[A-Za-z0-9_-]{16,64}$/.test(token)) return null;
  const [row] = await sql<{ messageId: string }[]>`
    update hold_links l set used_at = now()
    from held_messages h
    where l.token_hash = ${hashOf(token)} and l.person_id = ${person.id} and l.used_at is null and l.expires_at > now()
      and h.id = l.message_id and h.state = 'held'
    returning l.message_id as "messageId"`;
  return row?.messageId ?? null;
}

// Links that can no longer be spent, removed by the expiry sweep: up to `limit`.
export async function removeDeadHoldLinks(sql: Sql, limit: number): Promise<number> {
  const removed = await sql`
    delete from hold_links where token_hash in (
      select l.token_hash from hold_links l left join held_messages h on h.id = l.message_id
      where l.expires_at <= now() or l.used_at is not null or h.state is distinct from 'held' limit ${limit})`;
  return removed.count;
}
