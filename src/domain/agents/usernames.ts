import type { PendingQuery, Row } from 'postgres';
import type { Queries } from '../../db/connect';

// Agents and people share one namespace, so that a sender name never means two parties. The
// database holds it (sql/006_usernames.sql): a name is claimed once, and an agent or person row
// can only carry a name claimed for its kind.
export type UsernameOwner = 'agent' | 'person';

// The claim, for a CTE of the statement that writes the owner's row; it returns the name only
// when this claim took it. Of two writers taking one name at once, the second waits for the first
// to commit and then returns nothing.
export const claimUsername = (sql: Queries, username: string, owner: UsernameOwner): PendingQuery<Row[]> => sql`
  insert into usernames (username, owner) values (${username}, ${owner})
  on conflict do nothing
  returning username`;

// Who holds a name that a claim lost. A claim outlives its owner, so a name is never handed on.
export async function usernameOwner(sql: Queries, username: string): Promise<UsernameOwner | null> {
  const [row] = await sql<{ owner: UsernameOwner }[]>`select owner from usernames where username = ${username}`;
  return row?.owner ?? null;
}
