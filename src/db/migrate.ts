import { Logger as WorkerLogger, runMigrations } from 'graphile-worker';
import type { Sql } from './connect';
import { readMigrations } from './migration-files' with { type: 'macro' };
import type { Migration } from './migration-files';
import { workerPool } from './worker-pool';

// Every file in sql/, in order, read when this module is transpiled or bundled (see
// migration-files.ts): adding a migration is adding its file.
export const migrations: Migration[] = readMigrations();

// Applies our numbered migrations, then graphile-worker's own schema (the message transaction
// calls graphile_worker.add_jobs, so both must exist before the first request).
export async function migrate(sql: Sql, databaseUrl: string): Promise<void> {
  await sql.begin(async (tx) => {
    // A migration, and waiting for another instance's, may take as long as it takes: the pool's
    // bound on a statement is for requests.
    await tx`set local statement_timeout = 0`;
    // Serialises concurrent starts of several instances against one database.
    await tx`select pg_advisory_xact_lock(hashtext('ams.migrate'))`;
    await tx`create table if not exists schema_migrations (name text primary key, applied_at timestamptz not null default now())`;
    const applied = new Set((await tx`select name from schema_migrations`).map((r) => r.name as string));
    for (const m of migrations) {
      if (applied.has(m.name)) continue;
      await tx.unsafe(m.sql);
      await tx`insert into schema_migrations (name) values (${m.name})`;
    }
  });
  const pgPool = workerPool(databaseUrl, 1, () => {});
  try {
    await runMigrations({ pgPool, logger: quietWorkerLogger });
  } finally {
    await pgPool.end();
  }
}

export const quietWorkerLogger = new WorkerLogger(() => () => {});
