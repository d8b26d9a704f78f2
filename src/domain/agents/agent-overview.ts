import type { Sql } from '../../db/connect';
import { notFound } from '../shared/errors';
import { recordDecision, type Decider } from '../people/audit';
import { iso } from '../shared/iso-time';
import { keyBounds, pageOf, type PageQuery } from '../shared/keyset';
import { connectionFromRow, connectionsOf, type Connection, type ConnectionRow } from '../oauth/oauth-connections';
import type { Page } from '../shared/schemas';
import { containing } from '../shared/search';
import { endpointHealthOf, type EndpointHealth } from './endpoint-health';
import { latestTestEvents, type TestEvent } from './test-events';
import { lastSeenAt, onlineNow, presenceRecord, type PresenceRecord } from './presence';

export type AgentSummary = {
  id: string;
  username: string;
  archived: boolean;
  // Its A2A card is served to anyone, not only to agents of this service.
  cardListed: boolean;
  webhookUrl: string | null;
  webhookSetAt: string | null;
  createdAt: string;
  // Clients connected over OAuth to act as the agent (src/oauth).
  connections: Connection[];
  // How its webhook has been answering (endpoint-health.ts); null without a webhook.
  health: EndpointHealth | null;
  // The newest test event sent to its webhook, if any.
  lastTestEvent: TestEvent | null;
  // Its directory profile (directory.ts) and whether it is online (presence.ts).
  profile: { displayName: string | null; description: string | null; tags: string[] };
  presence: PresenceRecord;
};

type AgentRow = {
  id: string;
  username: string;
  archived: boolean;
  cardListed: boolean;
  webhookUrl: string | null;
  webhookSetAt: Date | null;
  createdAt: Date;
  connections: ConnectionRow[];
  displayName: string | null;
  description: string | null;
  tags: string[] | null;
  online: boolean;
  lastSeenAt: Date | null;
};

// The agents, for the people who run them: newest first, archived ones included, a page at a
// time, optionally only those whose name contains `search`.
// Read in one snapshot: a test event's answer and the health it moved are written together, and
// the page shows both or neither (read apart, a test event could show answered while its
// endpoint's health did not yet count it).
export async function listAgents(sql: Sql, search: string | null, page: PageQuery): Promise<Page<AgentSummary>> {
  const [rows, health, tests] = await sql.begin('isolation level repeatable read read only', async (tx) => {
    const rows = await tx<AgentRow[]>`
      select id, username, archived_at is not null as archived, a2a_card_listed as "cardListed", webhook_url as "webhookUrl",
             webhook_set_at as "webhookSetAt", created_at as "createdAt", ${connectionsOf(tx, tx`agents.id`)} as connections,
             p.display_name as "displayName", p.description, p.tags, ${onlineNow(tx, tx`agents.id`)} as online, ${lastSeenAt(tx, tx`agents.id`)} as "lastSeenAt"
      from agents left join lateral (select display_name, description, tags from agent_profiles where agent_id = agents.id) p on true
      where true ${search ? tx`and username ilike ${containing(search)}` : tx``} ${keyBounds(tx, tx`id`, page)}
      order by id desc
      limit ${page.limit + 1}`;
    const ids = rows.map((r) => r.id);
    return [rows, await endpointHealthOf(tx, ids), await latestTestEvents(tx, ids)] as const;
  });
  const agents = rows.map((r) => ({
    id: r.id,
    username: r.username,
    archived: r.archived,
    cardListed: r.cardListed,
    webhookUrl: r.webhookUrl,
    webhookSetAt: iso(r.webhookSetAt),
    createdAt: r.createdAt.toISOString(),
    connections: r.connections.map(connectionFromRow),
    health: health.get(r.id) ?? null,
    lastTestEvent: tests.get(r.id) ?? null,
    profile: { displayName: r.displayName, description: r.description, tags: r.tags ?? [] },
    presence: presenceRecord(r),
  }));
  return pageOf(agents, page.limit, (a) => a.id);
}

// The signing secret stays readable by contract, so that a person can copy it into the handler;
// who read it, and when, is on record (never the secret itself).
export async function revealSigningSecret(sql: Sql, decider: Decider, username: string) {
  return sql.begin(async (tx) => {
    const [row] = await tx<{ webhookUrl: string | null; signingSecret: string | null }[]>`
      select webhook_url as "webhookUrl", signing_secret as "signingSecret" from agents where username = ${username}`;
    if (!row) throw notFound(`No agent named ${username}.`);
    if (!row.signingSecret) throw notFound(`${username} has no webhook, so it has no signing secret.`);
    await recordDecision(tx, decider, { action: 'agent.webhook.secret.reveal', subjectType: 'agent', subject: username });
    return { username, webhookUrl: row.webhookUrl!, signingSecret: row.signingSecret };
  });
}
