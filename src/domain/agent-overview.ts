import type { Sql } from '../db/connect';
import { notFound } from './errors';

export type AgentSummary = {
  username: string;
  archived: boolean;
  webhookUrl: string | null;
  webhookSetAt: string | null;
  createdAt: string;
};

// Every agent, for the people who run them: newest first, archived ones included.
export async function listAgents(sql: Sql): Promise<AgentSummary[]> {
  const rows = await sql`
    select username, archived_at is not null as archived, webhook_url as "webhookUrl",
           webhook_set_at as "webhookSetAt", created_at as "createdAt"
    from agents order by id desc`;
  return rows.map((r) => ({
    username: r.username,
    archived: r.archived,
    webhookUrl: r.webhookUrl,
    webhookSetAt: r.webhookSetAt ? (r.webhookSetAt as Date).toISOString() : null,
    createdAt: (r.createdAt as Date).toISOString(),
  }));
}

// The signing secret stays readable by contract, so that a person can copy it into the handler.
export async function revealSigningSecret(sql: Sql, username: string) {
  const [row] = await sql<{ webhookUrl: string | null; signingSecret: string | null }[]>`
    select webhook_url as "webhookUrl", signing_secret as "signingSecret" from agents where username = ${username}`;
  if (!row) throw notFound(`No agent named ${username}.`);
  if (!row.signingSecret) throw notFound(`${username} has no webhook, so it has no signing secret.`);
  return { username, webhookUrl: row.webhookUrl!, signingSecret: row.signingSecret };
}
