import pg from 'pg';
import type { Config } from '../config';

// As many connections as jobs run at once, plus graphile-worker's LISTEN and its cron.
export const workerPoolSize = (config: Pick<Config, 'WEBHOOK_CONCURRENCY'>) => config.WEBHOOK_CONCURRENCY + 2;

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
