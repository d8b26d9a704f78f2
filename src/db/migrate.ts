import { Logger as WorkerLogger, runMigrations } from 'graphile-worker';
import core from '../../sql/001_core.sql' with { type: 'text' };
import webhooks from '../../sql/002_webhooks.sql' with { type: 'text' };
import people from '../../sql/003_people.sql' with { type: 'text' };
import announceAfterCommit from '../../sql/004_announce_after_commit.sql' with { type: 'text' };
import uuidV7WithoutParsing from '../../sql/005_uuid_v7_without_parsing.sql' with { type: 'text' };
import usernames from '../../sql/006_usernames.sql' with { type: 'text' };
import agentChangesNotify from '../../sql/007_agent_changes_notify.sql' with { type: 'text' };
import deliveryStepsForward from '../../sql/008_delivery_steps_forward.sql' with { type: 'text' };
import attemptLog from '../../sql/010_attempt_log.sql' with { type: 'text' };
import idempotencyKeys from '../../sql/011_idempotency_keys.sql' with { type: 'text' };
import dashboardAtScale from '../../sql/013_dashboard_at_scale.sql' with { type: 'text' };
import oneRecipientIndex from '../../sql/014_one_recipient_index.sql' with { type: 'text' };
import oauth from '../../sql/015_oauth.sql' with { type: 'text' };
import type { Sql } from './connect';
import { workerPool } from './worker-pool';

// Imported as text so that `bun build --compile` carries them inside the executable.
export const migrations: { name: string; sql: string }[] = [
  { name: '001_core', sql: core },
  { name: '002_webhooks', sql: webhooks },
  { name: '003_people', sql: people },
  { name: '004_announce_after_commit', sql: announceAfterCommit },
  { name: '005_uuid_v7_without_parsing', sql: uuidV7WithoutParsing },
  { name: '006_usernames', sql: usernames },
  { name: '007_agent_changes_notify', sql: agentChangesNotify },
  { name: '008_delivery_steps_forward', sql: deliveryStepsForward },
  { name: '010_attempt_log', sql: attemptLog },
  { name: '011_idempotency_keys', sql: idempotencyKeys },
  { name: '013_dashboard_at_scale', sql: dashboardAtScale },
  { name: '014_one_recipient_index', sql: oneRecipientIndex },
  { name: '015_oauth', sql: oauth },
];

// Applies our numbered migrations, then graphile-worker's own schema (the message transaction
// calls graphile_worker.add_jobs, so both must exist before the first request).
export async function migrate(sql: Sql, databaseUrl: string): Promise<void> {
  await sql.begin(async (tx) => {
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
