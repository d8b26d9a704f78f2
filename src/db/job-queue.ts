import type { WorkerPool } from 'graphile-worker';
import type { JSONValue, PendingQuery, Row } from 'postgres';
import type { Queries, Sql } from './connect';

// Every touch of graphile-worker beyond its documented API lives here: its private tables, the
// shape of its job_spec type, and a flag of its worker pool. They were written against this
// version; test/job-queue.test.ts fails when another one is installed, so that an upgrade is a
// deliberate read of this file rather than a surprise in production.
export const GRAPHILE_WORKER_VERSION = '0.18.0';

type Fragment = PendingQuery<Row[]>;

export type JobSpec = {
  task: string;
  payload: Fragment;
  // Null: due at once.
  runAt: Fragment;
  maxAttempts: number;
  key: Fragment;
};

// A SELECT that queues one job per row of `rows` (a FROM clause whose columns the spec's fragments
// name). Built by field name, not by position, so that a reordered job_spec type fails loudly.
export const addJobs = (sql: Queries, rows: Fragment, spec: JobSpec) => sql`
  select graphile_worker.add_jobs(array(
    select json_populate_record(null::graphile_worker.job_spec, json_build_object(
      'identifier', ${spec.task}::text, 'payload', ${spec.payload}, 'run_at', ${spec.runAt},
      'max_attempts', ${spec.maxAttempts}::int, 'job_key', ${spec.key}))
    from ${rows}
  ))`;

// Whether a job under `key` is queued or running. A job graphile-worker gave up on (attempts used
// up, not locked) is not live.
export const liveJob = (sql: Sql, key: Fragment) => sql`
  exists (select 1 from graphile_worker.jobs j
          where j.key = ${key} and (j.locked_at is not null or j.attempts < j.max_attempts))`;

// Whether the job under `key` is queued, not running, and its payload contains `match`.
export const queuedJobWith = (sql: Queries, key: Fragment, match: { [key: string]: JSONValue }) => sql`
  exists (select 1 from graphile_worker._private_jobs j
          where j.key = ${key} and j.locked_at is null and j.payload::jsonb @> ${sql.json(match)}::jsonb)`;

// Whether a job under `key` has been due for longer than `ms` without a worker taking it.
export const overdueJob = (sql: Sql, key: Fragment, ms: number) => sql`
  exists (select 1 from graphile_worker.jobs j
          where j.key = ${key} and j.locked_at is null and j.attempts < j.max_attempts
            and j.run_at < now() - ${ms} * interval '1 millisecond')`;

// Puts back the jobs of our tasks locked by worker pools that stopped beating (killed, frozen, cut
// off); a pool that never beat is judged by how long its jobs have been locked. Jobs of other
// tasks (another application sharing the schema, whose workers do not beat here) are never
// touched. A job the dead pool had fetched for its local queue and not started (as of its last
// beat) gets back the attempt graphile-worker counted when fetching it, so that its next run is
// not taken for one after a run cut off. Returns the pool ids whose jobs were released.
export async function releaseDeadWorkers(sql: Sql, tasks: string[], staleMs: number): Promise<string[]> {
  const stale = sql`now() - ${staleMs} * interval '1 millisecond'`;
  const rows = await sql<{ id: string }[]>`
    with ours as (
      select j.id, j.locked_by, j.locked_at from graphile_worker._private_jobs j
      join graphile_worker._private_tasks t on t.id = j.task_id
      where t.identifier = any(${tasks}::text[]) and j.locked_by is not null
    ), dead as (
      select distinct o.locked_by as id, coalesce(h.queued, '{}') as queued from ours o
      left join worker_heartbeats h on h.worker_id = o.locked_by
      where h.beat_at < ${stale} or (h.worker_id is null and o.locked_at < ${stale})
    ), released as (
      update graphile_worker._private_jobs j set locked_by = null, locked_at = null,
        attempts = case when j.id = any(dead.queued) then greatest(j.attempts - 1, 0) else j.attempts end
      from ours o join dead on dead.id = o.locked_by where j.id = o.id
    ), forgotten as (
      delete from worker_heartbeats where beat_at < ${stale}
    )
    select id from dead`;
  return rows.map((r) => r.id);
}

// Jobs still locked by this live pool that it is no longer running: graphile-worker does not await
// the query that completes or fails a finished job, and when that query is lost (the database went
// away at that moment) the job would stay locked by us for graphile-worker's 4 hours.
export async function releaseLostJobs(sql: Sql, workerId: string, running: string[], staleMs: number): Promise<number> {
  const released = await sql`
    update graphile_worker._private_jobs set locked_by = null, locked_at = null
    where locked_by = ${workerId} and locked_at < now() - ${staleMs} * interval '1 millisecond'
      and not (id = any(${running}::bigint[]))`;
  return released.count;
}

// Takes the unlocked jobs `ids` for the pool `workerId`, as graphile-worker's fetch takes a job
// (locked by the pool, one attempt counted), whether or not they are due yet; a job already
// retired is gone, and one a worker took first is left to it. Answers the ids taken, and those
// still there that were not (a worker's).
// The rows are locked first, in id order: one deleted meanwhile (retired by its record) is then
// not seen at all, rather than seen in the statement's snapshot and taken for a worker's.
export async function claimJobs(sql: Sql, workerId: string, ids: string[]): Promise<{ taken: string[]; notTaken: string[] }> {
  const rows = await sql<{ id: string; free: boolean }[]>`
    with found as (
      select id, locked_at is null and attempts < max_attempts as free
      from graphile_worker._private_jobs where id = any(${ids}::bigint[])
      order by id for update
    ), taken as (
      update graphile_worker._private_jobs j set locked_by = ${workerId}, locked_at = now(), attempts = j.attempts + 1
      from found where j.id = found.id and found.free
    )
    select id::text, free from found`;
  return { taken: rows.filter((r) => r.free).map((r) => r.id), notTaken: rows.filter((r) => !r.free).map((r) => r.id) };
}

// Where graphile-worker's add_jobs announces new jobs, and its workers listen.
export const JOBS_CHANNEL = 'jobs:insert';

// Makes the unlocked jobs `ids` due now, for the queue's workers to take, without the payload
// field `drop` (a mark for whoever was to run them instead), and announces them as add_jobs does.
export async function makeJobsDue(sql: Sql, ids: string[], drop: string): Promise<void> {
  await sql`
    with due as (
      update graphile_worker._private_jobs set run_at = least(run_at, now()), payload = (payload::jsonb - ${drop}::text)::json
      where id = any(${ids}::bigint[]) and locked_at is null
      returning id
    )
    select pg_notify(${JOBS_CHANNEL}, json_build_object('count', count(*))::text) from due having count(*) > 0`;
}

// Gives back a job claimed by `workerId` whose run failed, as graphile-worker fails a job: the
// error kept for its next run, due again after graphile-worker's back-off for its attempts.
export async function failClaimedJob(sql: Sql, workerId: string, id: string, error: string): Promise<void> {
  await sql`
    update graphile_worker._private_jobs
    set last_error = ${error}, run_at = greatest(now(), run_at) + exp(least(attempts, 10)) * interval '1 second',
        locked_by = null, locked_at = null
    where id = ${id} and locked_by = ${workerId}`;
}

// Deletes the jobs `ids`, as graphile-worker completes a job (none of ours is in a named queue,
// which would also need unlocking). A task whose last write retires its own job in that same
// statement is never run again once the write has committed, whether or not graphile-worker's own
// completion (batched, not awaited, given up after a long outage) ever reaches the database; that
// completion then deletes nothing. Written as the body of a CTE named `retired`; the delete runs
// whether or not the statement reads it.
export const retireJobs = (sql: Queries, ids: string[]) => sql`
  delete from graphile_worker._private_jobs where id = any(${ids}::bigint[]) returning id`;

// A condition that holds only once the `retired` CTE has run to its end: a part of the statement
// that adds a job under a retired job's key waits on it, or add_jobs would find the old job still
// holding the key and change the row being deleted (PostgreSQL then refuses the statement).
export const retiredFirst = (sql: Queries) => sql`(select count(*) from retired) >= 0`;

// graphile-worker leaves two dead row versions in its jobs table for every job (taken, then
// deleted when done), and each fetch of the next job walks past those its index still points at.
// Autovacuum visits a database at most once per autovacuum_naptime (a minute by default): a backlog
// drained at 1 000 doorbells/s leaves 120 000 by then, and every doorbell paid more for its fetch
// (docs/internals/performance-history.md, "Flat over time"). A table another vacuum holds is skipped; a role that
// does not own it gets PostgreSQL's warning, not an error, and leaves it to autovacuum. The empty
// pages at the table's end are kept for the next jobs rather than truncated: truncating takes an
// ACCESS EXCLUSIVE lock that every job fetch and add queued behind, and doorbells owed after a
// crash went out 30 s late instead of within a few (test-faults/crash.test.ts). A vacuum of the
// emptied table leaves statistics that say it holds nothing; graphile-worker's fetch is patched to
// take its batch by key whatever they say, as on them it walked the whole queue for every job it
// took (patches/graphile-worker@0.18.0.patch, docs/internals/performance-history.md).
export async function vacuumJobs(sql: Sql): Promise<void> {
  await sql`vacuum (skip_locked, truncate false) graphile_worker._private_jobs`;
}

// The pool exposes no public "stopping" state; nudging or replacing workers of a pool that is
// shutting down would start work it is about to abandon.
export const isShuttingDown = (pool: WorkerPool) => pool._shuttingDown;


// The queued, unlocked jobs `j` of `task` not due yet whose payload contains `match` (the payload
// is only in the private table). The clock is read as the statement runs, not at its
// transaction's start, so that a job just made due by another statement no longer counts.
const queuedForLater = (sql: Queries, task: string, match: { [key: string]: JSONValue }) => sql`
  from graphile_worker._private_jobs j
  join graphile_worker._private_tasks t on t.id = j.task_id
  where t.identifier = ${task} and j.locked_at is null and j.run_at > clock_timestamp()
    and j.payload::jsonb @> ${sql.json(match)}::jsonb`;

// Makes due now the queued, unlocked jobs of `task` due later whose payload contains `match`, the
// oldest first, at most `limit` of them. Answers how many. Callers that run at once never make the
// same job due twice (each would count it as woken, and one wake-up would be lost): a job another
// caller is waking is skipped, and one it has just woken is due, so no longer matches. Written
// against the private table, as graphile-worker's reschedule_jobs neither locks nor looks again.
export async function makeDueWhere(sql: Queries, task: string, match: { [key: string]: JSONValue }, limit?: number): Promise<number> {
  const rows = await sql<{ id: bigint }[]>`
    with due as (
      select j.id ${queuedForLater(sql, task, match)}
      order by j.run_at, j.id
      ${limit === undefined ? sql`` : sql`limit ${limit}`}
      for update of j skip locked
    )
    update graphile_worker._private_jobs j set run_at = clock_timestamp()
    from due where j.id = due.id
    returning j.id`;
  return rows.length;
}

// The distinct values of one payload field among the queued, unlocked jobs of `task` due later
// whose payload contains `match`.
export async function payloadValuesWhere(sql: Sql, task: string, match: { [key: string]: JSONValue }, field: string): Promise<string[]> {
  const rows = await sql<{ value: string }[]>`
    select distinct j.payload::jsonb ->> ${field} as value ${queuedForLater(sql, task, match)} and j.payload::jsonb ? ${field}`;
  return rows.map((r) => r.value);
}

// Jobs of a task still to run (queued, scheduled or running, attempts left), and how long the
// oldest of those already due has waited, for metrics.
export async function owedJobs(sql: Sql, task: string): Promise<{ owed: number; oldestDueSeconds: number }> {
  const [row] = await sql<{ owed: number; oldest: number | null }[]>`
    select count(*)::int as owed,
           extract(epoch from now() - min(j.run_at) filter (where j.run_at <= now()))::float8 as oldest
    from graphile_worker._private_jobs j
    join graphile_worker._private_tasks t on t.id = j.task_id
    where t.identifier = ${task} and j.attempts < j.max_attempts`;
  return { owed: row!.owed, oldestDueSeconds: Math.max(0, row!.oldest ?? 0) };
}

// Jobs graphile-worker gave up on (attempts used up, not running), last touched before `cutoff`:
// a doorbell's job that died this way is long since re-published or failed by the domain.
// Deleted a batch at a time, oldest first. Answers how many went.
export async function deleteDeadJobs(sql: Sql, cutoff: Date, batch: number): Promise<number> {
  const rows = await sql<{ deleted: number }[]>`
    delete from graphile_worker._private_jobs where id in (
      select id from graphile_worker._private_jobs
      where attempts >= max_attempts and locked_at is null and updated_at < ${cutoff}
      order by id limit ${batch})
    returning 1 as deleted`;
  return rows.length;
}
