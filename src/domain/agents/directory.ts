import type { Queries, Sql } from '../../db/connect';
import type { Agent } from './actors';
import { invalid, notFound } from '../shared/errors';
import { recordDecision, type Decider } from '../people/audit';
import { listLimit } from '../shared/limits';
import { searchText } from '../shared/search';
import type { SearchGate } from '../shared/search-gate';
import { validate } from '../shared/validate';
import { AgentProfileInput, Username, type AgentProfile, type DirectoryEntry, type DirectoryPage } from '../shared/schemas';
import { refusalBy } from './contact-policy';
import { lastSeenAt, onlineNow, presenceRecord } from './presence';

// The directory (docs/guides/find-an-agent.md): each agent's profile, which people or the agent
// itself set, and the search agents run over it. The A2A card and the MCP tool find_agents read
// the same profile.

type ProfileRow = { username: string; displayName: string | null; description: string | null; tags: string[]; updatedAt: Date | null };

const profileOf = (row: ProfileRow): AgentProfile => ({
  username: row.username,
  displayName: row.displayName,
  description: row.description,
  tags: row.tags,
  updatedAt: row.updatedAt === null ? null : row.updatedAt.toISOString(),
});

const profileColumns = (sql: Queries) =>
  sql`p.username, p.display_name as "displayName", p.description, p.tags, p.updated_at as "updatedAt"`;

// From a request body: the whole profile, a field left out cleared; tags lowercased, once each, sorted.
export function profileInput(raw: unknown) {
  const input = validate(AgentProfileInput, raw);
  const description = input.description?.trim() || null;
  const displayName = input.displayName?.trim() || null;
  const tags = [...new Set((input.tags ?? []).map((t) => t.toLowerCase()))].toSorted();
  return { displayName, description, tags };
}

async function writeProfile(tx: Queries, agentId: string, raw: unknown) {
  const profile = profileInput(raw);
  const [before] = await tx<ProfileRow[]>`select ${profileColumns(tx)} from agent_profiles p where p.agent_id = ${agentId} for update`;
  const [row] = await tx<ProfileRow[]>`
    update agent_profiles p set display_name = ${profile.displayName}, description = ${profile.description}, tags = ${profile.tags}, updated_at = now()
    where p.agent_id = ${agentId}
    returning ${profileColumns(tx)}`;
  return { before: before!, after: row! };
}

// The agent's own profile, as it sets it itself (PUT /api/agents/me/profile); not a person's
// decision, so not in the audit trail.
export async function setOwnProfile(sql: Sql, agent: Agent, raw: unknown): Promise<AgentProfile> {
  return sql.begin(async (tx) => profileOf((await writeProfile(tx, agent.id, raw)).after));
}

// A person sets an agent's profile (the dashboard, the CLI): recorded with what it was.
export async function setProfile(sql: Sql, decider: Decider, username: string, raw: unknown): Promise<AgentProfile> {
  return sql.begin(async (tx) => {
    const [agent] = await tx<{ id: string }[]>`select id from agents where username = ${username}`;
    if (!agent) throw notFound(`No agent named ${username}.`);
    const { before, after } = await writeProfile(tx, agent.id, raw);
    const fields = (p: ProfileRow) => ({ displayName: p.displayName, description: p.description, tags: p.tags });
    await recordDecision(tx, decider, { action: 'agent.profile.set', subjectType: 'agent', subject: username, before: fields(before), after: fields(after) });
    return profileOf(after);
  });
}

export async function agentProfile(sql: Queries, agentId: string): Promise<AgentProfile> {
  const [row] = await sql<ProfileRow[]>`select ${profileColumns(sql)} from agent_profiles p where p.agent_id = ${agentId}`;
  if (!row) throw notFound('This agent has no profile.');
  return profileOf(row);
}

export type DirectoryQuery = { text: string | null; tag: string | null; limit: number; after: string | null };

// From query values or tool arguments: `q` words in websearch syntax, `tag` one exact tag, `limit`
// by the rule of every list, `after` the `next` of the previous page (a username).
export function directoryQuery(raw: Record<string, unknown>): DirectoryQuery {
  const text = searchText(raw.q);
  const tag = searchText(raw.tag, 'tag')?.toLowerCase() ?? null;
  const after = raw.after === undefined || raw.after === null || raw.after === '' ? null : raw.after;
  if (after !== null) validate(Username, after, 'after');
  return { text, tag, limit: listLimit(raw.limit), after: after as string | null };
}

const NO_WORDS = 'q has no words to search for: give at least one word that is not excluded with -';

// The agents `caller` may put in a thread (contact-policy.ts's rule, the same statement that
// admits invitees), itself and archived agents left out, in username order, with their presence.
// A search with words runs under the search bounds (search-gate.ts): the caller's words decide its
// cost. The words match the username, display name, tags and description through the profile's
// GIN index; a tag matches exactly.
export async function findAgents(gate: SearchGate, caller: Agent, query: DirectoryQuery, abort?: AbortSignal): Promise<DirectoryPage> {
  return gate.run(caller.id, abort, async (tx) => {
    if (query.text !== null) {
      const [words] = await tx<{ some: boolean }[]>`select querytree(websearch_to_tsquery('ams_search', ${query.text})) not in ('', 'T') as some`;
      if (!words!.some) throw invalid(NO_WORDS, 'q');
    }
    const rows = await tx<(ProfileRow & { online: boolean; lastSeenAt: Date | null })[]>`
      select ${profileColumns(tx)}, ${onlineNow(tx, tx`a.id`)} as online, ${lastSeenAt(tx, tx`a.id`)} as "lastSeenAt"
      from agents a join agent_profiles p on p.agent_id = a.id
      where a.archived_at is null and a.id <> ${caller.id}
        ${query.text === null ? tx`` : tx`and p.document @@ websearch_to_tsquery('ams_search', ${query.text})`}
        ${query.tag === null ? tx`` : tx`and p.tags @> array[${query.tag}]::text[]`}
        ${query.after === null ? tx`` : tx`and a.username > ${query.after}`}
        and ${refusalBy(tx, caller.id)} is null
      order by a.username
      limit ${query.limit + 1}`;
    const agents: DirectoryEntry[] = rows.slice(0, query.limit).map((r) => ({ ...profileOf(r), presence: presenceRecord(r) }));
    return { agents, next: rows.length > query.limit ? agents.at(-1)!.username : null };
  });
}
