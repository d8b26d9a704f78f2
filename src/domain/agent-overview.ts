import type { Sql } from '../db/connect';
import { notFound } from './errors';
import type { Page } from './schemas';

export type AgentSummary = {
  username: string;
  archived: boolean;
  webhookUrl: string | null;
  webhookSetAt: string | null;
  createdAt: string;
};

// Every agent, for the people who run them: newest first, archived ones included.
// Every agent, newest first, a page at a time: `after` is the last username of the page before.
export async function listAgents(sql: Sql, { limit, after }: { limit: number; after?: string }): Promise<Page<AgentSummary>> {
  const rows = await sql`
    select username, archived_at is not null as archived, webhook_url as "webhookUrl",
           webhook_set_at as "webhookSetAt", created_at as "createdAt"
    from agents
    ${after === undefined ? sql`` : sql`where id < (select id from agents where username = ${after})`}
    order by id desc limit ${limit + 1}`;
  const items = rows.slice(0, limit).map((r) => ({
    username: r.username,
    archived: r.archived,
    webhookUrl: r.webhookUrl,
    webhookSetAt: r.webhookSetAt ? (r.webhookSetAt as Date).toISOString() : null,
    createdAt: (r.createdAt as Date).toISOString(),
  }));
  return { items, next: rows.length > limit ? items.at(-1)!.username : null };
}

// The signing secret stays readable by contract, so that a person can copy it into the handler.
export async function revealSigningSecret(sql: Sql, username: string) {
  const [row] = await sql<{ webhookUrl: string | null; signingSecret: string | null }[]>`
    select webhook_url as "webhookUrl", signing_secret as "signingSecret" from agents where username = ${username}`;
  if (!row) throw notFound(`No agent named ${username}.`);
  if (!row.signingSecret) throw notFound(`${username} has no webhook, so it has no signing secret.`);
  return { username, webhookUrl: row.webhookUrl!, signingSecret: row.signingSecret };
}
