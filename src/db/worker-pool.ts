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
// With `listenUrl` (DATABASE_DIRECT_URL, db/pooler.ts) the pool's LISTEN connection is direct and
// the rest go to `connectionString`, the pooler.
export function workerPool(connectionString: string, max: number, onError: (error: Error) => void, listenUrl?: string): pg.Pool {
  const watched = (pool: pg.Pool) => {
    pool.on('error', onError);
    pool.on('connect', (client) => client.on('error', onError));
    return pool;
  };
  if (!listenUrl) return watched(new pg.Pool({ connectionString, max }));
  const listening = new pg.Pool({ connectionString: listenUrl, max: 1, application_name: 'agent-messaging-service: job queue LISTEN' });
  return watched(new ListeningApart({ connectionString, max }, watched(listening)));
}

// graphile-worker 0.18 (db/job-queue.ts pins it) asks for its LISTEN connection, and only that
// one, with a callback (main.js's listenForChanges); its queries ask without.
class ListeningApart extends pg.Pool {
  constructor(
    config: pg.PoolConfig,
    private readonly listening: pg.Pool,
  ) {
    super(config);
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): void;
  override connect(callback?: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): Promise<pg.PoolClient> | void {
    if (callback) return this.listening.connect(callback);
    return super.connect();
  }

  override end(): Promise<void>;
  override end(callback: () => void): void;
  override end(callback?: () => void): Promise<void> | void {
    const ended = Promise.all([super.end(), this.listening.end()]).then(() => {});
    if (!callback) return ended;
    void ended.then(callback);
  }
}
