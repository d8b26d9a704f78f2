import pg from 'pg';
import type { Config } from '../config';
import { connect, type Sql } from './connect';

// As many connections as jobs run at once, plus graphile-worker's LISTEN and its cron.
export const workerPoolSize = (config: Pick<Config, 'WEBHOOK_CONCURRENCY'>) => config.WEBHOOK_CONCURRENCY + 2;

// The two statements every doorbell sends (the "still owed?" look-up and the record of its attempt,
// src/domain/deliveries/delivery-steps.ts) go over connections of their own, one each, since each
// has one statement in flight. PostgreSQL kept custom plans for them, planning them afresh at every
// call (a custom plan knows how many ids a batch holds, so the generic one looked dearer): 0.8 and
// 0.28 ms of planning against 0.41 and 0.03 ms of execution. On these connections it keeps one
// plan each (docs/performance.md, "Plans kept for the doorbell's statements"). Not for the whole
// pool: the inbox read needs its custom plan (test/inbox-plan.test.ts).
export const DOORBELL_STATEMENT_CONNECTIONS = 2;
export const doorbellStatementsPool = (url: string, config: Pick<Config, 'DB_CONNECT_TIMEOUT_S'>): Sql =>
  connect(url, DOORBELL_STATEMENT_CONNECTIONS, config.DB_CONNECT_TIMEOUT_S, { plan_cache_mode: 'force_generic_plan' });

// How graphile-worker fetches and completes our jobs (webhooks/worker.ts says why): the local queue
// holds as many as run at once, and completions go out together. The bench runs its baselines
// with the same.
export const workerBatching = (config: Pick<Config, 'WEBHOOK_CONCURRENCY'>) => ({
  localQueue: { size: config.WEBHOOK_CONCURRENCY },
  completeJobBatchDelay: 0,
});

// A node-postgres pool for graphile-worker (which speaks `pg`, not postgres.js). We make it rather
// than let graphile-worker do so, because it ends a pool of its own making without waiting: the
// caller here ends this one and awaits it, so no connection outlives its user to fail later.
// Errors of idle connections (a restart, a dropped database) go to `onError` instead of crashing.
export function workerPool(connectionString: string, max: number, onError: (error: Error) => void): pg.Pool {
  const pool = new pg.Pool({ connectionString, max });
  pool.on('error', onError);
  pool.on('connect', (client) => client.on('error', onError));
  return pool;
}
