import type { Queries } from '../../db/connect';
import { invalid } from '../shared/errors';
import { firstIdAt } from '../shared/ids';
import { iso } from '../shared/iso-time';
import { keyBounds, pageOf, type PageQuery } from '../shared/keyset';
import type { Page } from '../shared/schemas';
import { checkStorableText } from '../shared/validate';

// Who made a decision: a person on the dashboard, an operator at the CLI (who signs in nowhere: the
// CLI holds the database's credentials), or the service itself (a hold that expired).
export type Decider = { kind: 'person'; person: DecidingPerson } | { kind: 'cli' } | { kind: 'service' };
// What the record keeps of a person (people.ts's Person is one).
export type DecidingPerson = { id: string; username: string };

export const byPerson = (person: DecidingPerson): Decider => ({ kind: 'person', person });
export const BY_CLI: Decider = { kind: 'cli' };
export const BY_SERVICE: Decider = { kind: 'service' };

export const deciderName = (d: Decider) => (d.kind === 'person' ? d.person.username : d.kind);

export type SubjectType = 'agent' | 'thread' | 'message' | 'delivery' | 'person' | 'operator_webhook';

export type Decision = {
  action: string;
  subjectType: SubjectType;
  subject: string;
  before?: unknown;
  after?: unknown;
  reason?: string | null;
};

// Records a decision in the caller's statement or transaction, so that the record commits exactly
// when the decision does.
export async function recordDecision(sql: Queries, decider: Decider, d: Decision): Promise<void> {
  await sql`
    insert into audit_events (person_id, actor, action, subject_type, subject, before, after, reason)
    values (${decider.kind === 'person' ? decider.person.id : null}, ${deciderName(decider)}, ${d.action}, ${d.subjectType},
            ${d.subject}, ${d.before === undefined ? null : sql.json(d.before as never)}, ${d.after === undefined ? null : sql.json(d.after as never)},
            ${d.reason ?? null})`;
}

// Many decisions of one decider in one statement (a person approving a thousand held messages).
export async function recordDecisions(sql: Queries, decider: Decider, ds: Decision[]): Promise<void> {
  if (ds.length === 0) return;
  const json = (v: unknown) => (v === undefined ? null : JSON.stringify(v));
  await sql`
    insert into audit_events (person_id, actor, action, subject_type, subject, before, after, reason)
    select ${decider.kind === 'person' ? decider.person.id : null}, ${deciderName(decider)}, d.action, d.subject_type, d.subject,
           d.before::jsonb, d.after::jsonb, d.reason
    from unnest(${ds.map((d) => d.action)}::text[], ${ds.map((d) => d.subjectType)}::text[], ${ds.map((d) => d.subject)}::text[],
                ${ds.map((d) => json(d.before))}::text[], ${ds.map((d) => json(d.after))}::text[], ${ds.map((d) => d.reason ?? null)}::text[])
         as d(action, subject_type, subject, before, after, reason)`;
}

// The trail as people read it: who, when, what, on which subject, and the subject before and after.
export type AuditEntry = {
  id: string;
  at: string;
  actor: string;
  action: string;
  subjectType: SubjectType;
  subject: string;
  before: unknown;
  after: unknown;
  reason: string | null;
};

// Which entries: an action or a family of them (a prefix such as `agent.`), a subject (an agent's or
// person's username, a thread's, message's or delivery's id), who decided (a person's username,
// `cli` or `service`), and a time range.
export type AuditFilter = { action: string | null; subject: string | null; actor: string | null; since: Date | null; until: Date | null };

const SUBJECT_TYPES: SubjectType[] = ['agent', 'thread', 'message', 'delivery', 'person', 'operator_webhook'];
const text = (raw: unknown) => (typeof raw === 'string' && raw.trim() !== '' ? raw.trim() : null);
const DURATION = /^(\d{1,6})([mhd])$/;
const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

// A time as a person writes it: an ISO 8601 time, or a duration back from now such as 90m, 24h, 7d.
export function auditTime(raw: unknown, name: string, now = Date.now()): Date | null {
  const value = text(raw);
  if (value === null) return null;
  const ago = DURATION.exec(value);
  if (ago) return new Date(now - Number(ago[1]) * UNIT_MS[ago[2] as keyof typeof UNIT_MS]);
  const at = /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(value) ? new Date(value) : null;
  if (!at || Number.isNaN(at.getTime())) throw invalid(`${name} must be a time such as 2026-11-23T09:30:00Z, or a duration back from now such as 24h or 7d`, name);
  return at;
}

// From query values or CLI flags (`action`, `subject`, `actor`, `since`, `until`); a value that
// cannot mean anything is refused with a sentence naming it.
export function auditFilter(raw: Record<string, unknown>): AuditFilter {
  const [action, subject, actor] = [text(raw.action), text(raw.subject), text(raw.actor)];
  for (const [name, value] of [['action', action], ['subject', subject], ['actor', actor]] as const) {
    if (value !== null) checkStorableText(value, name);
  }
  const since = auditTime(raw.since, 'since');
  const until = auditTime(raw.until, 'until');
  if (since && until && since > until) throw invalid('since must be earlier than until', 'since');
  return { action, subject, actor, since, until };
}

// An entry's id is taken a moment after its `at` (its transaction's start); a minute of room either
// side lets a time range ride on the primary key and still be decided by `at`.
const ID_CLOCK_ROOM_MS = 60_000;

// The actions recorded whose name starts with `prefix`, found by walking the action index from one
// distinct name to the next (there are a few dozen names however long the trail): a range of the
// index would depend on the database's collation, which may ignore the dots.
const actionsStartingWith = (sql: Queries, prefix: string) => sql`
  with recursive actions (action) as (
    select min(action) from audit_events
    union all
    select (select min(x.action) from audit_events x where x.action > actions.action) from actions where actions.action is not null
  )
  select action from actions where starts_with(action, ${prefix})`;

// Conditions over audit_events `e`, each preceded by `and`. The action and the subject ride on their
// indexes (an action family as the names it stands for), the time range on the primary key. Who
// decided has no index of its own: the trail grows with people's decisions, not with agents'
// traffic, and the scan is bounded as every statement is (STATEMENT_TIMEOUT_MS).
function filterSql(sql: Queries, f: AuditFilter) {
  return sql`
    ${f.action ? sql`and e.action = any(array(${actionsStartingWith(sql, f.action)}))` : sql``}
    ${f.subject ? sql`and e.subject_type = any(${SUBJECT_TYPES}::text[]) and e.subject = ${f.subject}` : sql``}
    ${f.actor ? sql`and e.actor = ${f.actor}` : sql``}
    ${f.since ? sql`and e.id >= ${firstIdAt(f.since.getTime() - ID_CLOCK_ROOM_MS)} and e.at >= ${f.since}` : sql``}
    ${f.until ? sql`and e.id < ${firstIdAt(f.until.getTime() + ID_CLOCK_ROOM_MS)} and e.at < ${new Date(f.until.getTime() + 1)}` : sql``}`;
}

type EntryRow = Omit<AuditEntry, 'at'> & { at: Date };

const selectEntries = (sql: Queries) => sql`
  select e.id, e.at, e.actor, e.action, e.subject_type as "subjectType", e.subject, e.before, e.after, e.reason
  from audit_events e`;

const toEntry = (row: EntryRow): AuditEntry => ({ ...row, at: iso(row.at) });

// A page of the trail, newest first, by key (keyset.ts).
export async function listDecisions(sql: Queries, filter: AuditFilter, page: PageQuery): Promise<Page<AuditEntry>> {
  const rows = await sql<EntryRow[]>`${selectEntries(sql)}
    where true ${filterSql(sql, filter)} ${keyBounds(sql, sql`e.id`, page)}
    order by e.id desc
    limit ${page.limit + 1}`;
  return pageOf(rows.map(toEntry), page.limit, (e) => e.id);
}

const EXPORT_BATCH = 500;

// Every entry the filter picks, oldest first, read a batch at a time after the last one given, so
// that an export of a year holds one batch in memory.
export async function* exportDecisions(sql: Queries, filter: AuditFilter): AsyncGenerator<AuditEntry> {
  let after: string | null = null;
  for (;;) {
    const rows: EntryRow[] = await sql<EntryRow[]>`${selectEntries(sql)}
      where true ${filterSql(sql, filter)} ${after ? sql`and e.id > ${after}` : sql``}
      order by e.id
      limit ${EXPORT_BATCH}`;
    for (const row of rows) yield toEntry(row);
    if (rows.length < EXPORT_BATCH) return;
    after = rows.at(-1)!.id;
  }
}

// One batch of entries older than the retention, oldest first (retention.ts repeats it).
export async function pruneDecisions(sql: Queries, days: number, batch: number): Promise<number> {
  const rows = await sql`
    delete from audit_events where id in (
      select id from audit_events where at < now() - ${days} * interval '1 day' order by at limit ${batch})
    returning 1`;
  return rows.length;
}
