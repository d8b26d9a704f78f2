import { EventEmitter } from 'node:events';
import { Logger as WorkerLogger, run, type Runner, type WorkerEvents, type WorkerPool } from 'graphile-worker';
import { endpointHealthRule, operatorRetryDelays, retryDelays, webhookUrlPolicy, type Config } from '../config';
import type { Sql } from '../db/connect';
import { isDatabaseUnavailable } from '../db/unavailable';
import { isShuttingDown, JOBS_CHANNEL, vacuumJobs } from '../db/job-queue';
import { workerBatching, workerPool, workerPoolSize } from '../db/worker-pool';
import { behindPooler, sessionUrl } from '../db/pooler';
import { planKeepingConnection } from '../db/plan-keeping-connection';
import { NOTIFY_TASK } from '../domain/deliveries/notify-jobs';
import { ringHere } from '../domain/deliveries/doorbells-at-once';
import type { Logger } from '../log';
import type { Metrics } from '../metrics';
import { startHeartbeat } from './heartbeat';
import { rememberWebhooks } from './credentials';
import { endpointSlots } from './endpoint-slots';
import { notifier as createNotifier } from './notify-task';
import { ringAtOnce, type Ringer } from './ring-at-once';
import { settlesWithin } from '../settles-within';
import { REPUBLISH_TASK, republishTask } from './republish';
import { sweeps } from '../sweeps';
import { HOLD_CRONTAB, holdTasks } from '../hold-alerts';
import { TEST_EVENT_TASK } from '../domain/agents/test-events';
import { createMailer } from '../mailer';
import { ENDPOINT_HEALTH_CRON, ENDPOINT_HEALTH_TASK, endpointAlertsTask } from './endpoint-alerts';
import { testEventTask } from './test-event-task';
import { operatorNoticeTask } from './operator-notice-task';
import { OPERATOR_NOTICE_TASK } from '../domain/people/operator-notices';
import { PushNotTaken, pushTask } from './push-task';
import { PUSH_TASK, type RenderPush } from '../domain/deliveries/push-configs';

// A doorbell parked behind its endpoint's cap is woken when a slot frees there; should every process
// that could wake it stop first, the job falls due by itself after this long and is tried again.
const PARKED_BACKSTOP_MS = 60_000;
// How often a worker looks for endpoints with parked doorbells that it has free slots for: parked by
// another process (a dead one included), or a wake-up that failed on a database error.
const PARKED_SWEEP_MS = 1_000;

// Jobs this process finishes between two vacuums of the queue's table (job-queue.ts's vacuumJobs):
// about 10 000 dead row versions (two a job) at most for a job fetch to walk past, whatever
// autovacuum does.
const VACUUM_JOBS_AFTER = 5_000;

export type WorkerDeps = {
  sql: Sql;
  databaseUrl: string;
  config: Config;
  log: Logger;
  // Called if graphile-worker's runner ends without stop() having been called. Nothing in this
  // process would ring a doorbell or run the re-publish sweep after that, so the process should
  // end and be restarted; another instance's heartbeat check gives back the jobs it held.
  onFailed?: (error: Error) => void;
  // Doorbell attempts are counted and timed here.
  metrics?: Metrics;
  // How a door's push-notification configurations are told of a delivery's moves (the A2A
  // door's, wired in service.ts); without it, pushes stay queued for a worker that has it.
  renderPush?: RenderPush;
};
export type RunningWorker = {
  workerId: string;
  runner: Runner;
  // Milliseconds since this worker's heartbeat last reached the database.
  silentForMs: () => number;
  stop: () => Promise<void>;
};

// graphile-worker in this process: doorbells are picked up through LISTEN/NOTIFY the moment the
// message commits (those of this process's own posts rung at once instead, ring-at-once.ts), retries are woken on time, the re-publish sweep runs from its crontab, and a
// heartbeat lets any live worker release the jobs of a dead one. Tasks are a list, not a
// directory, so the compiled executable carries them.
export async function startWorker({ sql, databaseUrl, config, log, onFailed, metrics, renderPush }: WorkerDeps): Promise<RunningWorker> {
  const events: WorkerEvents = new EventEmitter();
  let pool: WorkerPool | undefined;
  events.on('pool:create', ({ workerPool }) => {
    pool = workerPool;
  });
  // Jobs this pool holds. A finished job stays listed for a while, because graphile-worker marks it
  // complete or failed in a query it does not await; only a job whose query was lost is given back.
  // (Finished jobs are pruned when asked for, not by a timer each: a timer per job cost 5 % of the
  // process's CPU draining a backlog.)
  const running = new Set<string>();
  const finished = new Map<string, number>();
  // Jobs fetched (and locked) for the pool's local queue that no worker has started yet.
  const fetched = new Set<string>();
  events.on('localQueue:getJobs:complete', ({ jobs }) => jobs.forEach((job) => fetched.add(job.id)));
  events.on('localQueue:returnJobs', ({ jobs }) => jobs.forEach((job) => fetched.delete(job.id)));
  events.on('job:start', ({ job }) => {
    fetched.delete(job.id);
    running.add(job.id);
  });
  events.on('job:complete', ({ job }) => {
    running.delete(job.id);
    finished.delete(job.id);
    finished.set(job.id, performance.now());
    vacuumWhenDue();
  });
  let finishedSinceVacuum = 0;
  let vacuuming = false;
  const vacuumWhenDue = () => {
    if (++finishedSinceVacuum < VACUUM_JOBS_AFTER || vacuuming) return;
    finishedSinceVacuum = 0;
    vacuuming = true;
    vacuumJobs(sql)
      .catch((error) => log.warn('job_table_vacuum_failed', { error: (error as Error).message }))
      .finally(() => (vacuuming = false));
  };
  const held = () => {
    const since = performance.now() - config.WORKER_STALE_MS;
    for (const [id, at] of finished) {
      if (at >= since) break;
      finished.delete(id);
    }
    return [...fetched, ...running, ...finished.keys(), ...(ringer?.held() ?? [])];
  };
  const wakeTimers = new Set<ReturnType<typeof setTimeout>>();
  // A retry is due in the future, where LISTEN/NOTIFY cannot announce it; rather than wait for the
  // next poll, look for it when it falls due (a little after, as the due time is the database's).
  const wakeAfter = (delayMs: number) => {
    const timer = setTimeout(() => {
      wakeTimers.delete(timer);
      if (pool && !isShuttingDown(pool)) pool.nudge(1);
    }, delayMs + 10);
    wakeTimers.add(timer);
  };
  // Opened at the start, with the rest (db/plan-keeping-connection.ts says why they are apart).
  const keepingPlans = (purpose: string) => planKeepingConnection(sessionUrl(config, databaseUrl), config.DB_CONNECT_TIMEOUT_S, sql, log, purpose);
  const owedStatement = keepingPlans('doorbell owed look-up');
  const recordStatement = keepingPlans('doorbell attempt record');
  // graphile-worker's own connections: its LISTEN and cron, and one per concurrent job to fetch it
  // (the tasks themselves use the service's pool). Behind a transaction pooler its LISTEN is direct.
  const pgPool = workerPool(databaseUrl, workerPoolSize(config), (error) => log.warn('worker_pool_error', { error: error.message }), config.DATABASE_DIRECT_URL);
  const send = { policy: webhookUrlPolicy(config), timeoutMs: config.WEBHOOK_TIMEOUT_MS };
  // Requests in flight per URL, doorbells and pushes together. An endpoint that answers quickly may
  // use half the slots; one that is slow or not yet heard from, its small cap (endpoint-slots.ts).
  const slots = endpointSlots({
    slowCap: config.WEBHOOK_ENDPOINT_CONCURRENCY,
    fastCap: Math.ceil(config.WEBHOOK_CONCURRENCY / 2),
    reserve: Math.ceil(config.WEBHOOK_CONCURRENCY / 2),
  });
  const notifier = createNotifier({
    sql,
    doorbellStatements: { owed: owedStatement, record: recordStatement },
    log,
    metrics,
    send,
    retryPolicy: { delaysMs: retryDelays(config) },
    onRetryScheduled: wakeAfter,
    credentials: rememberWebhooks(),
    slots,
    parkedForMs: PARKED_BACKSTOP_MS,
    nudge: (count) => pool && !isShuttingDown(pool) && pool.nudge(count),
  });
  const cleanUps = sweeps(sql, log, config);
  const taskList = {
    [NOTIFY_TASK]: notifier.task,
    [REPUBLISH_TASK]: republishTask(sql, log, { publishAttempts: config.PUBLISH_ATTEMPTS }),
    [TEST_EVENT_TASK]: testEventTask({ sql, log, metrics, send }),
    [OPERATOR_NOTICE_TASK]: operatorNoticeTask({
      sql, log, metrics, send: { ...send, timeoutMs: config.OPERATOR_WEBHOOK_TIMEOUT_MS }, retryDelaysMs: operatorRetryDelays(config), publicUrl: config.PUBLIC_URL,
    }),
    ...(renderPush ? { [PUSH_TASK]: pushTask({ sql, log, stalledAfterMs: config.STALLED_AFTER_MS, send, slots, render: renderPush }) } : {}),
    [ENDPOINT_HEALTH_TASK]: endpointAlertsTask({
      sql, log, metrics, mailer: createMailer(config, log), rule: endpointHealthRule(config), publicUrl: config.PUBLIC_URL,
    }),
    ...holdTasks({ sql, log, metrics, mailer: createMailer(config, log), publicUrl: config.PUBLIC_URL, holdHours: config.HOLD_EXPIRES_AFTER_HOURS }),
    ...cleanUps.tasks,
  };
  let ownListenerDown = false;
  events.on('pool:listen:error', () => (ownListenerDown = true));
  events.on('pool:listen:success', () => (ownListenerDown = false));
  let stopping = false;
  let runnerEnded = false;
  let runner: Runner | undefined;
  let relay: { unlisten: () => Promise<void> } | undefined;
  let heartbeat: ReturnType<typeof startHeartbeat> | undefined;
  let sweep: ReturnType<typeof setInterval> | undefined;
  let ringer: Ringer | undefined;
  let unring: (() => void) | undefined;
  // Running doorbells finish; one still waiting when graphile-worker's grace period ends is
  // cancelled and its job released for another worker. After a failed start every part is taken
  // down whatever the others answer.
  const stop = async ({ afterFailedStart = false } = {}) => {
    const step = (done: Promise<unknown>) => (afterFailedStart ? done.catch(() => {}) : done);
    stopping = true;
    clearInterval(sweep);
    for (const timer of wakeTimers) clearTimeout(timer);
    await relay?.unlisten().catch(() => {});
    unring?.();
    try {
      // Together, and both to their end before the connections close, whatever either answers.
      const stopped = await Promise.allSettled([ringer?.stop(RING_STOP_GRACE_MS), runner && !runnerEnded ? stopRunner(runner, log) : undefined]);
      const failed = stopped.find((outcome) => outcome.status === 'rejected');
      if (failed && !afterFailedStart) throw failed.reason;
      if (heartbeat) await step(heartbeat.stop());
    } finally {
      // Whatever the steps above answered, so that no connection outlives the worker.
      await step(Promise.all([pgPool.end(), owedStatement.end(), recordStatement.end()]));
    }
  };
  // One sweep at a time; a sweep that fails on a database error is the next one's to do.
  let sweeping = false;
  async function sweepParked() {
    if (sweeping || !pool || isShuttingDown(pool)) return;
    sweeping = true;
    try {
      await notifier.wakeEveryParked();
    } catch (error) {
      log[isDatabaseUnavailable(error) ? 'warn' : 'error']('parked_doorbell_sweep_failed', { error: (error as Error).message });
    } finally {
      sweeping = false;
    }
  }
  try {
    await Promise.all([owedStatement.open(), recordStatement.open()]);
    runner = await run({
      pgPool,
      // Jobs are fetched for the whole pool at once, as many as it runs at a time, and those that
      // finish together are completed by one statement: the queue's own work per job falls to a
      // fraction. A batch whose statement fails is tried again, 20 times over several minutes
      // (patches/graphile-worker@0.18.0.patch: unpatched, the first failure shut the pool down;
      // test-faults/batched-drain-restart.test.ts); should all fail, graphile-worker still shuts
      // the pool down and the process ends to be restarted (onFailed). A doorbell job's completion
      // is a formality (its run retired the job already); failures, rare, stay one statement each
      // with graphile-worker's own retries, so that a failure recorded minutes late cannot unlock
      // a job that has been put back and is running again.
      preset: {
        plugins: [replaceExitedWorkers],
        // Behind a transaction pooler its statements go unprepared, as the service's do (db/pooler.ts).
        worker: { ...workerBatching(config), preparedStatements: !behindPooler(config) },
      },
      concurrency: config.WEBHOOK_CONCURRENCY,
      noHandleSignals: true,
      events,
      logger: workerLogger(log),
      taskList,
      crontab: [`${config.REPUBLISH_CRON} ${REPUBLISH_TASK}`, ENDPOINT_HEALTH_CRON, ...HOLD_CRONTAB, ...cleanUps.crontab].join('\n'),
    });
    runner.promise.then(
      () => ended(new Error('graphile-worker stopped without being asked to.')),
      (error: Error) => ended(error),
    );
    // graphile-worker's own LISTEN backs off for up to a minute after it loses its connection (7 s,
    // then 20 s, after a few seconds' outage). While it is down, our listening connection (back
    // within a second) passes new-job notifications on, so doorbells keep going out at once
    // instead of on the 2-second poll.
    relay = await sql.listen(JOBS_CHANNEL, (payload) => {
      if (!ownListenerDown || !pool || isShuttingDown(pool)) return;
      let count = 1;
      try {
        const announced = Number((JSON.parse(payload) as { count?: unknown }).count);
        if (Number.isInteger(announced) && announced > 0) count = announced;
      } catch {}
      pool.nudge(count);
    });
    heartbeat = startHeartbeat(
      sql,
      pool!.id,
      {
        intervalMs: config.WORKER_HEARTBEAT_MS,
        staleMs: config.WORKER_STALE_MS,
        // A dead pool's parked doorbells have nobody left to wake them: they are woken with its jobs.
        onReleased: (deadWorkers) => {
          if (pool && !isShuttingDown(pool)) pool.nudge(config.WEBHOOK_CONCURRENCY);
          if (deadWorkers > 0) void sweepParked();
        },
        running: held,
        queued: () => [...fetched],
        tasks: Object.keys(taskList),
      },
      log,
    );
    await heartbeat.ready;
    // The process that parked these may have died, and nothing else would wake them before their
    // backstop.
    const woken = await notifier.wakeEveryParked();
    sweep = setInterval(() => void sweepParked(), PARKED_SWEEP_MS);
    // Last, once the heartbeat vouches for this pool's id, which the jobs it claims are locked by.
    ringer = ringAtOnce({
      sql,
      workerId: pool!.id,
      log,
      run: notifier.run,
      cap: config.WEBHOOK_CONCURRENCY,
      queueHolds: () => running.size + fetched.size,
      slots,
    });
    unring = ringHere(sql, ringer.ring);
    log.info('worker_started', { workerId: pool!.id, concurrency: config.WEBHOOK_CONCURRENCY, parkedDoorbellsWoken: woken });
  } catch (error) {
    // A start that failed (the database out of connections, say) leaves nothing running, so that
    // it can be tried again.
    await stop({ afterFailedStart: true });
    throw error;
  }
  const workerId = pool!.id;
  const beating = heartbeat!;
  function ended(error: Error) {
    runnerEnded = true;
    if (stopping) return;
    log.error('worker_failed', { workerId: pool?.id, error: error.message });
    onFailed?.(error);
  }
  return {
    workerId,
    runner: runner!,
    silentForMs: () => beating.silentForMs(),
    stop: async () => {
      await stop();
      log.info('worker_stopped', { workerId });
    },
  };
}

// graphile-worker's stop waits for its batched completions, and a batch that failed while the
// database was away sleeps between tries (up to two minutes after "starting up" answers). Every
// doorbell job is already retired by the statement that recorded it, so waiting longer than the
// running jobs' grace (graphile-worker's 5 s) plus a little holds up only the completion of jobs
// another pool puts back once this one's heartbeat is gone.
const RUNNER_STOP_GRACE_MS = 10_000;

// How long doorbells rung at once may finish when the worker stops, as graphile-worker allows its
// running jobs, before they are cut on the wire and their jobs go back to the queue.
const RING_STOP_GRACE_MS = 5_000;

async function stopRunner(runner: Runner, log: Logger) {
  if (!(await settlesWithin(runner.stop(), RUNNER_STOP_GRACE_MS))) {
    log.warn('worker_stop_incomplete', { waitedMs: RUNNER_STOP_GRACE_MS, reason: 'job completions still waiting for the database' });
  }
}

// graphile-worker shuts its whole pool down when one of its workers exits on an error, and a
// database restart does exactly that (a job fetch fails): the process would go on serving requests
// but never ring another doorbell. A new worker takes the place of one that exited, after a pause
// so that a database still away is not hammered.
const REPLACE_EXITED_WORKER_AFTER_MS = 1_000;
const replaceExitedWorkers: GraphileConfig.Plugin = {
  name: 'ReplaceExitedWorkers',
  version: '1.0.0',
  worker: {
    middleware: {
      poolWorkerPrematureExit(_next, { workerPool, replaceWithNewWorker }) {
        setTimeout(() => {
          if (!isShuttingDown(workerPool)) replaceWithNewWorker();
        }, REPLACE_EXITED_WORKER_AFTER_MS);
      },
    },
  },
};

const levels = { error: 'error', warning: 'warn', info: 'debug', debug: 'debug' } as const;

// graphile-worker's chatter goes to our log at debug level; its warnings and errors stay visible.
// graphile-worker reports a lost or refused connection as an error; while the database is away
// (or out of connections) that is the outage the other parts log as a warning, not a fault. node-pg
// gives a dropped connection no code, only these messages.
const OUTAGE = /Connection terminated unexpectedly|connection error and is not queryable/;

function workerLogger(log: Logger) {
  return new WorkerLogger((scope) => (level, message, meta) => {
    const { error, job } = (meta ?? {}) as { error?: unknown; job?: { attempts: number; max_attempts: number; payload: unknown } };
    // A receiver that did not take a push: its health, told without a stack; the queue retries it.
    if (error instanceof PushNotTaken) {
      const config = (job?.payload as { configId?: unknown } | undefined)?.configId;
      log.warn('push_failed', { config, attempt: job?.attempts, of: job?.max_attempts, error: error.message });
      return;
    }
    const outage = level === 'error' && (isDatabaseUnavailable(error) || OUTAGE.test(message));
    log[outage ? 'warn' : (levels[level as keyof typeof levels] ?? 'debug')]('graphile_worker', { message, ...scope });
  });
}
