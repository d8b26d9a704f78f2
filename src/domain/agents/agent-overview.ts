import type { Reads, Sql } from '../../db/connect';
import { invalid, notFound } from '../shared/errors';
import { isId } from '../shared/ids';
import { recordDecision, type Decider } from '../people/audit';
import { iso } from '../shared/iso-time';
import { keyBounds, pageOf, pageQuery, type PageQuery } from '../shared/keyset';
import { connectionFromRow, connectionsOf, type Connection, type ConnectionRow } from '../oauth/oauth-connections';
import type { Page } from '../shared/schemas';
import { containing } from '../shared/search';
import { failureKind } from '../deliveries/retry-policy';
import { endpointHealthOf, endpointStateSql, stalledByRecipient, type EndpointHealth, type HealthReading } from './endpoint-health';
import { latestTestEvents, type TestEvent } from './test-events';
import { previousSecretUntil } from './signing-secrets';
import { lastSeenAt, onlineNow, presenceRecord, type PresenceRecord } from './presence';

export type AgentSummary = {
  id: string;
  username: string;
  archived: boolean;
  // Its A2A card is served to anyone, not only to agents of this service.
  cardListed: boolean;
  webhookUrl: string | null;
  webhookSetAt: string | null;
  // While a rotated signing secret's grace lasts, when the secret it replaced stops signing.
  previousSecretExpiresAt: string | null;
  createdAt: string;
  // Clients connected over OAuth to act as the agent (src/oauth).
  connections: Connection[];
  // How its webhook has been answering (endpoint-health.ts); null without a webhook.
  health: EndpointHealth | null;
  // The newest test event sent to its webhook, if any.
  lastTestEvent: TestEvent | null;
  // Its place in the list's order, for `after` and `since`: its id when newest first.
  cursor: string;
  // Its directory profile (directory.ts) and whether it is online (presence.ts).
  profile: { displayName: string | null; description: string | null; tags: string[] };
  presence: PresenceRecord;
};

// Which agents the list shows, and in what order. `health`: the webhook states to show (`none`:
// agents without a webhook); `trouble`: webhooks in trouble first (switched off, then failing, then
// any other state short of healthy), then untried, healthy, no webhook and archived, each newest first.
export const HEALTH_FILTERS = ['failing', 'disabled', 'paused', 'slow', 'not-reporting', 'healthy', 'untried', 'none'] as const;
export type AgentListing = { search: string | null; health: string[] | null; sort: 'newest' | 'trouble' };
export const ALL_AGENTS: AgentListing = { search: null, health: null, sort: 'newest' };

// From query values: `health` a comma-separated list of HEALTH_FILTERS, `sort` newest or trouble.
export function agentListing(raw: Record<string, unknown>, search: string | null): AgentListing {
  const health = typeof raw.health === 'string' && raw.health !== '' ? [...new Set(raw.health.split(','))] : null;
  const unknown = health?.find((h) => !(HEALTH_FILTERS as readonly string[]).includes(h));
  if (unknown !== undefined) throw invalid(`health must be one or more of ${HEALTH_FILTERS.join(', ')}, separated by commas`, 'health');
  const sort = raw.sort === undefined || raw.sort === '' ? 'newest' : raw.sort;
  if (sort !== 'newest' && sort !== 'trouble') throw invalid('sort must be newest or trouble', 'sort');
  return { search, health, sort };
}

// A trouble-first cursor: `<rank>_<id>`.
type RankKey = { rank: number; id: string };
const RANK_KEY = /^(\d)_(.+)$/;
function rankKey(raw: unknown, name: string): RankKey | null {
  if (raw === undefined || raw === null || raw === '') return null;
  const match = typeof raw === 'string' ? RANK_KEY.exec(raw) : null;
  if (!match || !isId(match[2])) throw invalid(`${name} must be a cursor taken from the list`, name);
  return { rank: Number(match[1]), id: match[2] };
}

// The page's bounds as the listing's order reads them: ids newest first, rank keys trouble first.
export type AgentPage = PageQuery | { after: RankKey | null; since: RankKey | null; limit: number };
export function agentPage(raw: Record<string, unknown>, listing: AgentListing): AgentPage {
  if (listing.sort === 'newest') return pageQuery(raw);
  return { after: rankKey(raw.after, 'after'), since: rankKey(raw.since, 'since'), limit: pageQuery({ limit: raw.limit }).limit };
}

type AgentRow = {
  id: string;
  rank: number;
  username: string;
  archived: boolean;
  cardListed: boolean;
  webhookUrl: string | null;
  webhookSetAt: Date | null;
  previousSecretExpiresAt: Date | null;
  createdAt: Date;
  connections: ConnectionRow[];
  displayName: string | null;
  description: string | null;
  tags: string[] | null;
  online: boolean;
  lastSeenAt: Date | null;
};

// The agents, for the people who run them: newest first (or webhooks in trouble first), archived
// ones included, a page at a time, optionally only those whose name contains `search` or whose
// webhook is in one of the `health` states. Each row's state is read from its one health row, by
// primary key: the list costs a pass over the agents, never over deliveries or attempts.
// Read in one snapshot: a test event's answer and the health it moved are written together, and
// the page shows both or neither (read apart, a test event could show answered while its
// endpoint's health did not yet count it).
export async function listAgents(reads: Reads, listing: AgentListing, page: AgentPage, reading: HealthReading): Promise<Page<AgentSummary>> {
  return reads.mayLag(async (sql) => {
    const { search } = listing;
    const trouble = listing.sort === 'trouble';
    const [rows, health, tests] = await sql.begin('isolation level repeatable read read only', async (tx) => {
      const state = tx`case when agents.webhook_url is null then 'none' else ${endpointStateSql(tx, 'agents', 'h', tx`coalesce(s.n, 0)`, reading.slowMs)} end`;
      const { after, since } = page;
      const bounds =
        typeof after === 'string' || typeof since === 'string'
          ? keyBounds(tx, tx`x.id`, page as PageQuery)
          : tx`${after ? tx`and (x.rank > ${after.rank} or (x.rank = ${after.rank} and x.id < ${after.id}))` : tx``}
               ${since ? tx`and (x.rank < ${since.rank} or (x.rank = ${since.rank} and x.id >= ${since.id}))` : tx``}`;
      const rows = await tx<AgentRow[]>`
        with stalled as (${stalledByRecipient(tx, reading.stalledAfterMs, null)})
        select * from (
          select id, username, archived_at is not null as archived, a2a_card_listed as "cardListed", webhook_url as "webhookUrl",
                 webhook_set_at as "webhookSetAt", ${previousSecretUntil(tx, 'agents')} as "previousSecretExpiresAt", created_at as "createdAt", ${connectionsOf(tx, tx`agents.id`)} as connections,
                 p.display_name as "displayName", p.description, p.tags, ${onlineNow(tx, tx`agents.id`)} as online, ${lastSeenAt(tx, tx`agents.id`)} as "lastSeenAt",
                 ${state} as state,
                 case when agents.archived_at is not null then 6
                      else case ${state} when 'disabled' then 0 when 'failing' then 1 when 'untried' then 3 when 'healthy' then 4 when 'none' then 5 else 2 end
                 end as rank
          from agents left join endpoint_health h on h.agent_id = agents.id left join stalled s on s.recipient_id = agents.id
            left join lateral (select display_name, description, tags from agent_profiles where agent_id = agents.id) p on true
          where true ${search ? tx`and username ilike ${containing(search)}` : tx``}
        ) x
        where true ${listing.health ? tx`and x.state = any(${listing.health}::text[])` : tx``} ${bounds}
        order by ${trouble ? tx`x.rank, x.id desc` : tx`x.id desc`}
        limit ${page.limit + 1}`;
      const ids = rows.map((r) => r.id);
      return [rows, await endpointHealthOf(tx, ids, reading), await latestTestEvents(tx, ids)] as const;
    });
    const agents = rows.map((r) => ({
      id: r.id,
      username: r.username,
      archived: r.archived,
      cardListed: r.cardListed,
      webhookUrl: r.webhookUrl,
      webhookSetAt: iso(r.webhookSetAt),
      previousSecretExpiresAt: iso(r.previousSecretExpiresAt),
      createdAt: r.createdAt.toISOString(),
      connections: r.connections.map(connectionFromRow),
      health: health.get(r.id) ?? null,
      lastTestEvent: tests.get(r.id) ?? null,
      profile: { displayName: r.displayName, description: r.description, tags: r.tags ?? [] },
      presence: presenceRecord(r),
      cursor: trouble ? `${r.rank}_${r.id}` : r.id,
    }));
    return pageOf(agents, page.limit, (a) => a.cursor);
  });
}

export type WebhookTrouble = {
  username: string;
  state: string;
  // The last failure, as the Overview groups it ("HTTP 503"); null when none is on record.
  failure: string | null;
  failingSince: string | null;
  disabledAt: string | null;
  disabledReason: string | null;
};

// At most this many agents are looked up at once (a page of deliveries names no more recipients).
export const WEBHOOK_TROUBLE_NAMES = 100;

// Of the named agents, those whose webhook is in trouble (switched off, failing, or any state
// short of healthy and untried), for the pages that list their deliveries: one lookup by name each.
export async function webhookTroubleOf(sql: Sql, raw: unknown, reading: HealthReading): Promise<WebhookTrouble[]> {
  const names = typeof raw === 'string' && raw !== '' ? [...new Set(raw.split(','))] : [];
  if (names.length === 0) throw invalid('agents must name one or more agents, separated by commas', 'agents');
  if (names.length > WEBHOOK_TROUBLE_NAMES) throw invalid(`agents may name at most ${WEBHOOK_TROUBLE_NAMES} agents`, 'agents');
  const rows = await sql<{
    username: string; state: string; status: number | null; error: string | null;
    failingSince: Date | null; disabledAt: Date | null; disabledReason: string | null;
  }[]>`
    with stalled as (${stalledByRecipient(sql, reading.stalledAfterMs, null)})
    select * from (
      select a.username, ${endpointStateSql(sql, 'a', 'h', sql`coalesce(s.n, 0)`, reading.slowMs)} as state, h.last_failure_status as status, h.last_failure_error as error,
             coalesce(h.failing_since, a.webhook_failing_since) as "failingSince", a.webhook_disabled_at as "disabledAt",
             a.webhook_disabled_reason as "disabledReason"
      from agents a left join endpoint_health h on h.agent_id = a.id left join stalled s on s.recipient_id = a.id
      where a.username = any(${names}::text[]) and a.webhook_url is not null
    ) x
    where x.state not in ('healthy', 'untried')
    order by x.username`;
  return rows.map((r) => ({
    username: r.username,
    state: r.state,
    failure: r.status === null && r.error === null ? null : failureKind(r),
    failingSince: iso(r.failingSince),
    disabledAt: iso(r.disabledAt),
    disabledReason: r.disabledReason,
  }));
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
