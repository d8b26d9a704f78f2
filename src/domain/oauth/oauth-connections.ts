import type { PendingQuery, Row } from 'postgres';
import { activeAgent } from '../agents/agents';
import type { Queries, Sql } from '../../db/connect';
import type { Agent } from '../agents/actors';
import { invalid, notFound, unauthorized } from '../shared/errors';
import { isId } from '../shared/ids';
import { iso } from '../shared/iso-time';
import { hashKey } from '../agents/keys';
import { recordDecision, type Decider } from '../people/audit';

// The one scope an access token is issued for: calling this service's MCP tools as one agent.
export const MCP_SCOPE = 'mcp';

// A client a person connected to an agent on the dashboard (OAuth for MCP clients, src/oauth). Its
// tokens act as that agent, under every rule of the agent's key, while the connection exists and
// the agent is not archived; archiving ends the connection for good (sql/015_oauth.sql).

export type Connection = {
  grantId: string;
  clientId: string;
  clientName: string | null;
  clientUri: string | null;
  approvedBy: string | null;
  approvedAt: string;
  lastUsedAt: string | null;
};

// Tokens the authorization server issues are base64url; anything else is refused unread.
const ACCESS_TOKEN = /^[A-Za-z0-9_-]{20,256}$/;
// Last use is written at most this often per connection: a busy client does not write per call.
const LAST_USE_GRANULARITY = '1 minute';

// The authorization server's account is the person who decides (src/oauth/provider.ts): it is
// asked for them again when a refresh token is used, and a person no longer invited gets none.
export async function findPerson(sql: Sql, id: string): Promise<{ id: string } | undefined> {
  if (!isId(id)) return undefined;
  const [person] = await sql<{ id: string }[]>`select id from people where id = ${id}`;
  return person;
}

// The agent an access token acts as, in one statement: the token (by its hash) unexpired and
// issued for `resource`, its grant's connection still there (the connection names the agent),
// that agent not archived. Revocation of any of them takes effect at the next request.
export async function authenticateAccessToken(sql: Sql, token: string, resource: string): Promise<Agent> {
  if (!ACCESS_TOKEN.test(token)) throw unauthorized('The access token is malformed.');
  const [agent] = await sql<Agent[]>`
    with caller as (
      select c.grant_id, a.id, a.username
      from oauth_artifacts t
      join oauth_connections c on c.grant_id = t.grant_id
      join agents a on a.id = c.agent_id
      where t.model = 'AccessToken' and t.id_hash = ${hashKey(token)} and t.expires_at > now()
        and t.payload->>'aud' = ${resource} and a.archived_at is null
    ),
    used as (
      update oauth_connections c set last_used_at = now()
      from caller
      where c.grant_id = caller.grant_id
        and (c.last_used_at is null or c.last_used_at < now() - ${LAST_USE_GRANULARITY}::interval)
    )
    select id, username from caller`;
  if (!agent) throw unauthorized('The access token is not recognised, has expired, was revoked, or is not for this resource.');
  return agent;
}

// When an access token stops answering by itself, or null for a token not found.
export async function accessTokenExpiresAt(sql: Sql, token: string): Promise<Date | null> {
  if (!ACCESS_TOKEN.test(token)) return null;
  const [row] = await sql<{ expiresAt: Date }[]>`
    select expires_at as "expiresAt" from oauth_artifacts where model = 'AccessToken' and id_hash = ${hashKey(token)}`;
  return row?.expiresAt ?? null;
}

// The agent a person chose on the consent page: it must exist and be active.
export async function findActiveAgentNamed(sql: Sql, username: unknown): Promise<Agent> {
  if (typeof username !== 'string' || username === '') throw invalid('agent: choose the agent the client will act as.', 'agent');
  const agent = await activeAgent(sql, username);
  if (!agent) throw invalid(`agent: no active agent named ${username}.`, 'agent');
  return agent;
}

// A person's approval, as the connection its tokens will be issued under: written only while the
// agent is active, its row held so that an archive cannot commit in between and miss it.
export async function connectClient(
  sql: Sql,
  decider: Decider,
  input: { grantId: string; clientId: string; clientName: string | null; clientUri: string | null; agentId: string; personId: string },
) {
  // A registered client's registration is kept from then on (unconnected ones expire,
  // src/oauth/adapter.ts); a client named by its metadata document has none.
  await sql.begin(async (tx) => {
    const [connected] = await tx<{ grant_id: string; agent: string }[]>`
      with chosen as (select id, username from agents where id = ${input.agentId} and archived_at is null for share),
      connected as (
        insert into oauth_connections (grant_id, agent_id, client_id, client_name, client_uri, approved_by)
        select ${input.grantId}, id, ${input.clientId}, ${input.clientName}, ${input.clientUri}, ${input.personId} from chosen
        returning grant_id
      ),
      kept as (
        update oauth_artifacts set expires_at = null
        where model = 'Client' and id_hash = ${hashKey(input.clientId)} and exists (select 1 from connected)
      )
      select grant_id, (select username from chosen) as agent from connected`;
    if (!connected) throw invalid('agent: the chosen agent was archived meanwhile; choose another.', 'agent');
    await recordDecision(tx, decider, {
      action: 'agent.connection.approve',
      subjectType: 'agent',
      subject: connected.agent,
      after: { grantId: input.grantId, clientId: input.clientId, clientName: input.clientName },
    });
  });
}

// Disconnect on the dashboard: the connection goes, and with it (trigger) every code and token.
export async function disconnectClient(sql: Sql, decider: Decider, grantId: string) {
  return sql.begin(async (tx) => {
    const [gone] = await tx<{ agent: string; clientId: string; clientName: string | null }[]>`
      with gone as (delete from oauth_connections where grant_id = ${grantId} returning agent_id, client_id, client_name)
      select a.username as agent, gone.client_id as "clientId", gone.client_name as "clientName" from gone join agents a on a.id = gone.agent_id`;
    if (!gone) throw notFound('No such connected client; it may have been disconnected already.');
    await recordDecision(tx, decider, {
      action: 'agent.connection.revoke',
      subjectType: 'agent',
      subject: gone.agent,
      before: { grantId, clientId: gone.clientId, clientName: gone.clientName },
    });
    return { grantId, revoked: true as const };
  });
}

export const REGISTRATIONS_PER_HOUR = 20;

// Open registration (MCP hosts register unannounced, or name a metadata document the server has
// not fetched yet), limited per client address: counted and taken in one statement under a lock on
// the address, so concurrent registrations cannot overrun it. Answers whether it may go ahead.
export async function takeRegistrationSlot(sql: Sql, client: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(3, hashtext(${client}))`;
    await tx`delete from oauth_registration_attempts where client = ${client} and attempted_at < now() - interval '1 hour'`;
    const [taken] = await tx<{ taken: number }[]>`
      insert into oauth_registration_attempts (client)
      select ${client}
      where (select count(*) from oauth_registration_attempts where client = ${client}) < ${REGISTRATIONS_PER_HOUR}
      returning 1 as taken`;
    return !!taken;
  });
}

// The agents a person may choose on the consent page: every active one, by name.
export async function choosableAgents(sql: Sql): Promise<string[]> {
  const rows = await sql<{ username: string }[]>`
    select username from agents where archived_at is null order by username limit 1000`;
  return rows.map((r) => r.username);
}

// The connected clients of each agent, newest approval first, for the Agents page: a fragment for
// listAgents' select, a json array of ConnectionRow.
export const connectionsOf = (sql: Queries, agentId: PendingQuery<Row[]>) => sql`
  coalesce((
    select json_agg(json_build_object(
      'grantId', c.grant_id, 'clientId', c.client_id,
      'clientName', c.client_name, 'clientUri', c.client_uri,
      'approvedBy', p.username, 'approvedAt', c.approved_at, 'lastUsedAt', c.last_used_at
    ) order by c.approved_at desc)
    from oauth_connections c
    left join people p on p.id = c.approved_by
    where c.agent_id = ${agentId}
  ), '[]'::json)`;

// One element of connectionsOf's array: a Connection whose times are still PostgreSQL's text, as
// times inside json arrive.
export type ConnectionRow = Connection;

export const connectionFromRow = (c: ConnectionRow): Connection => ({
  grantId: c.grantId,
  clientId: c.clientId,
  clientName: c.clientName,
  clientUri: c.clientUri,
  approvedBy: c.approvedBy,
  approvedAt: iso(c.approvedAt),
  lastUsedAt: iso(c.lastUsedAt),
});
