import type { Queries } from '../../db/connect';
import type { Person } from './people';

// Who made a decision: a person on the dashboard, an operator at the CLI (who signs in nowhere: the
// CLI holds the database's credentials), or the service itself (a hold that expired).
export type Decider = { kind: 'person'; person: Person } | { kind: 'cli' } | { kind: 'service' };

export const byPerson = (person: Person): Decider => ({ kind: 'person', person });
export const BY_CLI: Decider = { kind: 'cli' };
export const BY_SERVICE: Decider = { kind: 'service' };

export const deciderName = (d: Decider) => (d.kind === 'person' ? d.person.username : d.kind);

export type SubjectType = 'agent' | 'thread' | 'message' | 'delivery' | 'person';

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
