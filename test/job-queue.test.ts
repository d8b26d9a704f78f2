import { describe, expect, test } from 'bun:test';
import { readFileSync } from 'node:fs';
import { GRAPHILE_WORKER_VERSION, makeDueWhere, releaseDeadWorkers, vacuumJobs } from '../src/db/job-queue';
import { useHarness } from './support/harness';
import { eventually } from './support/receiver';

// src/db/job-queue.ts reaches into graphile-worker's private tables and types. These tests fail
// when graphile-worker changes under it, and prove that its recovery touches only our own jobs.
const h = useHarness();

describe('graphile-worker internals', () => {
  test('the installed graphile-worker is the version job-queue.ts was written against', () => {
    const installed = JSON.parse(readFileSync(require.resolve('graphile-worker/package.json'), 'utf8')).version;
    expect(installed).toBe(GRAPHILE_WORKER_VERSION);
  });

  test('its schema still has the fields and columns job-queue.ts names', async () => {
    const columns = async (type: string) =>
      (await h.db.sql<{ name: string }[]>`
        select a.attname as name from pg_attribute a
        where a.attrelid = ${type}::regclass and a.attnum > 0 and not a.attisdropped order by a.attnum`).map((r) => r.name);
    expect(await columns('graphile_worker.job_spec')).toEqual(
      ['identifier', 'payload', 'queue_name', 'run_at', 'max_attempts', 'job_key', 'priority', 'flags'],
    );
    expect(await columns('graphile_worker._private_jobs')).toEqual(expect.arrayContaining(['id', 'task_id', 'locked_at', 'locked_by', 'key']));
    expect(await columns('graphile_worker._private_tasks')).toEqual(expect.arrayContaining(['id', 'identifier']));
    expect(await columns('graphile_worker.jobs')).toEqual(expect.arrayContaining(['key', 'locked_at', 'attempts', 'max_attempts']));
  });
});

describe('releasing the jobs of dead workers', () => {
  test("only our tasks' jobs are given back; another application's long job stays with its worker", async () => {
    const lockedLongAgo = async (task: string, worker: string) => {
      const [job] = await h.db.sql<{ id: string }[]>`select id from graphile_worker.add_job(${task}, '{}'::json)`;
      await h.db.sql`
        update graphile_worker._private_jobs set locked_by = ${worker}, locked_at = now() - interval '1 hour'
        where id = ${job!.id}`;
      return job!.id;
    };
    const ours = await lockedLongAgo('notify', 'our-dead-pool');
    const theirs = await lockedLongAgo('their_report', 'their-busy-pool');
    const released = await releaseDeadWorkers(h.db.sql, ['notify', 'republish'], 15_000);
    expect(released).toEqual(['our-dead-pool']);
    const locks = await h.db.sql`select id::text, locked_by from graphile_worker._private_jobs where id in ${h.db.sql([ours, theirs])} order by id`;
    expect([...locks]).toEqual([
      { id: String(ours), locked_by: null },
      { id: String(theirs), locked_by: 'their-busy-pool' },
    ]);
  });
});

describe('releasing the jobs of a dead pool with a local queue', () => {
  // graphile-worker counts an attempt when it fetches a job; a pool that fetched a batch for its
  // local queue and died had started only some of them. A job it never started must come back as
  // it was, or its next run would be taken for one after a run cut off (an attempt logged that
  // never was).
  test('a job fetched but not started gets its attempt back; a started one keeps it', async () => {
    const fetched = async () => {
      const [job] = await h.db.sql<{ id: string }[]>`select id from graphile_worker.add_job('notify', '{}'::json)`;
      await h.db.sql`
        update graphile_worker._private_jobs set locked_by = 'queue-dead-pool', locked_at = now() - interval '1 minute', attempts = 1
        where id = ${job!.id}`;
      return job!.id;
    };
    const started = await fetched();
    const neverStarted = await fetched();
    await h.db.sql`
      insert into worker_heartbeats (worker_id, beat_at, queued)
      values ('queue-dead-pool', now() - interval '1 minute', ${[String(neverStarted)]}::bigint[])`;
    expect(await releaseDeadWorkers(h.db.sql, ['notify'], 15_000)).toEqual(['queue-dead-pool']);
    const jobs = await h.db.sql`
      select id::text, locked_by, attempts from graphile_worker._private_jobs where id in ${h.db.sql([started, neverStarted])} order by id`;
    expect([...jobs]).toEqual([
      { id: String(started), locked_by: null, attempts: 1 },
      { id: String(neverStarted), locked_by: null, attempts: 0 },
    ]);
  });
});

describe('waking parked jobs', () => {
  // Each wake-up counts what it made due; a job made due twice is one wake-up lost, and with it a
  // free slot nobody fills until the job's backstop.
  test('two wake-ups at once never make the same job due twice', async () => {
    const parked = { parked: true, endpoint: 'https://race.example/hook' };
    const park = async () => {
      const [job] = await h.db.sql<{ id: string }[]>`
        select id from graphile_worker.add_job('race_parked', ${h.db.sql.json(parked)}::json, run_at => now() + interval '1 hour')`;
      return job!.id;
    };
    const ids = [await park(), await park()];
    let commit!: () => void;
    const held = new Promise<void>((resolve) => (commit = resolve));
    let firstWoke = -1;
    const first = h.db.sql.begin(async (tx) => {
      firstWoke = await makeDueWhere(tx, 'race_parked', parked, 1);
      await held;
    });
    await eventually(async () => firstWoke === 1);
    // The second starts while the first has not committed: it must take the other job, not wait
    // for the first's and then wake it once more.
    const second = makeDueWhere(h.db.sql, 'race_parked', parked, 1);
    await Bun.sleep(100);
    commit();
    await first;
    expect(await second).toBe(1);
    const due = await h.db.sql`
      select id from graphile_worker._private_jobs where id = any(${ids.map(String)}::bigint[]) and run_at <= now()`;
    expect(due).toHaveLength(2);
    // Nothing is left parked to wake.
    expect(await makeDueWhere(h.db.sql, 'race_parked', parked, 1)).toBe(0);
  });
});

describe('vacuuming the jobs table', () => {
  // The dead row versions finished jobs leave are what each job fetch walks past; the worker clears
  // them itself rather than wait for autovacuum's next visit.
  test('the dead versions finished jobs left are gone after vacuumJobs', async () => {
    const stats = async () => {
      const [row] = await h.db.sql<{ dead: number; vacuums: number }[]>`
        select n_dead_tup::int as dead, vacuum_count::int as vacuums from pg_stat_user_tables
        where schemaname = 'graphile_worker' and relname = '_private_jobs'`;
      return row!;
    };
    await h.db.sql`select graphile_worker.add_jobs(array(
      select row('vacuum_me', '{}'::json, null, null, null, null, null, null)::graphile_worker.job_spec
      from generate_series(1, 300)))`;
    // A backend that goes idle reports its counts within 10 s, not at once: asked to, at once.
    await h.db.sql.begin(async (tx) => {
      await tx`delete from graphile_worker._private_jobs where task_id = (
        select id from graphile_worker._private_tasks where identifier = 'vacuum_me')`;
      await tx`select pg_stat_force_next_flush()`;
    });
    await eventually(async () => (await stats()).dead >= 300);
    const before = await stats();
    await vacuumJobs(h.db.sql);
    await eventually(async () => {
      const after = await stats();
      return after.vacuums > before.vacuums && after.dead < 300;
    });
  });
});

describe('fetching jobs after the jobs table was vacuumed empty', () => {
  // A vacuum of the emptied table (vacuumJobs after a drain, or autovacuum) leaves statistics that
  // say it holds nothing. graphile-worker's fetch then locked its batch by walking every queued job
  // once per job taken (a nested loop over the whole table): 19 ms per fetch of 32 from a backlog of
  // 4 000 instead of 0.4 ms, until the next analyze. patches/graphile-worker@0.18.0.patch has it
  // take its batch by key whatever the statistics say (docs/internals/performance-history.md, "A fetch that read
  // the whole queue").
  test("the fetch takes its batch by key, reading none of the other queued jobs", async () => {
    const { run } = await import('graphile-worker');
    const { workerPool, workerBatching, workerPoolSize } = await import('../src/db/worker-pool');
    const statements: string[] = [];
    // As the service's worker fetches: a batch of as many as it runs at once.
    const config = { WEBHOOK_CONCURRENCY: 32 };
    const pool = workerPool(h.db.url, workerPoolSize(config), () => {});
    pool.on('connect', (client) => {
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const config = args[0] as string | { text?: string };
        statements.push(typeof config === 'string' ? config : (config.text ?? ''));
        return query(...args);
      };
    });
    let ran = 0;
    const runner = await run({
      pgPool: pool,
      concurrency: config.WEBHOOK_CONCURRENCY,
      noHandleSignals: true,
      preset: { worker: workerBatching(config) },
      logger: new (await import('graphile-worker')).Logger(() => () => {}),
      taskList: { plan_probe_once: async () => void ran++ },
    });
    await h.db.sql`select graphile_worker.add_job('plan_probe_once', '{}'::json)`;
    await eventually(async () => ran === 1);
    await runner.stop();
    await pool.end();
    const fetch = statements.find((text) => text.includes('j_raw') && text.includes('update'));
    expect(fetch).toBeDefined();

    await h.db.sql`delete from graphile_worker._private_jobs`;
    await vacuumJobs(h.db.sql);
    await h.db.sql`select graphile_worker.add_jobs(array(
      select row('plan_probe_backlog', '{}'::json, null, null, null, null, null, null)::graphile_worker.job_spec
      from generate_series(1, 4000)))`;
    const [task] = await h.db.sql<{ id: number }[]>`
      select id from graphile_worker._private_tasks where identifier = 'plan_probe_backlog'`;
    type PlanNode = {
      'Node Type': string;
      'Relation Name'?: string;
      'Actual Rows': number;
      'Actual Loops': number;
      'Rows Removed by Join Filter'?: number;
      'Rows Removed by Filter'?: number;
      Plans?: PlanNode[];
    };
    const plan = await h.db.sql.begin(async (tx) => {
      const [row] = await tx.unsafe(`explain (analyze, format json) ${fetch}`, ['plan-probe-pool', [task!.id]]);
      await tx`rollback and chain`;
      return (row!['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan;
    });
    const nodes: PlanNode[] = [];
    const walk = (node: PlanNode) => {
      nodes.push(node);
      node.Plans?.forEach(walk);
    };
    walk(plan);
    // Rows a scan of the jobs passed on, and rows it read and dropped.
    const scans = nodes.filter((n) => n['Relation Name'] === '_private_jobs' && n['Node Type'] !== 'ModifyTable');
    const jobsRead = scans.map((n) => n['Actual Rows'] * n['Actual Loops']);
    expect(plan['Actual Rows']).toBe(32);
    expect(Math.max(...jobsRead)).toBeLessThanOrEqual(32);
    expect(scans.reduce((sum, n) => sum + (n['Rows Removed by Filter'] ?? 0) * n['Actual Loops'], 0)).toBe(0);
    expect(nodes.reduce((sum, n) => sum + (n['Rows Removed by Join Filter'] ?? 0), 0)).toBe(0);
  });
});
