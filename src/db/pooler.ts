import type { Config } from '../config';
import type { Sql } from './connect';

// A transaction pooler (PgBouncer with `pool_mode = transaction`) hands each transaction whichever
// server connection is free, so nothing of a session survives past a transaction there. Checked
// against PgBouncer 1.18 (test-faults/pooler.test.ts):
// - LISTEN runs on the server connection of its statement, which then serves others: nothing is
//   heard. Every LISTEN goes over DATABASE_DIRECT_URL (database.ts), graphile-worker's too
//   (worker-pool.ts).
// - A statement prepared on one server connection is missing on the next; postgres.js then waits
//   for an answer that never comes. The pool through the pooler prepares nothing, nor does
//   graphile-worker's (PgBouncer 1.21's max_prepared_statements would keep them; not relied on).
// - A session's SET (the plan-keeping connections' plan_cache_mode) would change other clients'
//   statements: those connections are direct.
// - PgBouncer refuses startup parameters but a handful ("unsupported startup parameter:
//   statement_timeout"), or drops them when told to (ignore_startup_parameters): the bound is then the
//   database's or role's own setting, checked at start.
// - Migrations run direct, where they may wait for locks as long as they need; they take only a
//   transaction's advisory lock.
// Everything else the service sends is one statement or one transaction, its SET LOCALs and
// set_config(…, true) included, and cancelling a statement works through PgBouncer.

// DATABASE_DIRECT_URL set says DATABASE_URL is such a pooler.
export const behindPooler = (config: Pick<Config, 'DATABASE_DIRECT_URL'>) => config.DATABASE_DIRECT_URL !== undefined;

// How the pools that carry requests (the primary's, and a replica's, which a deployment behind a
// pooler reaches through one as well) open their connections: behind a pooler, unprepared and
// with the bound left to the database's own setting (replicated to its replicas with the catalog).
export const requestPoolOptions = (config: Pick<Config, 'DATABASE_DIRECT_URL' | 'STATEMENT_TIMEOUT_MS'>) =>
  behindPooler(config) ? { prepare: false } : { statementTimeoutMs: config.STATEMENT_TIMEOUT_MS };

// Where what needs a session of its own connects.
export const sessionUrl = (config: Pick<Config, 'DATABASE_DIRECT_URL'>, databaseUrl: string) => config.DATABASE_DIRECT_URL ?? databaseUrl;

// A pooler that refuses the statement bound as a startup parameter, met without DATABASE_DIRECT_URL.
export function poolerRefusal(error: unknown): string | null {
  const message = error instanceof Error ? error.message : String(error);
  if (!message.includes('unsupported startup parameter')) return null;
  return `${message}, as a connection pooler such as PgBouncer answers; behind a transaction pooler set DATABASE_DIRECT_URL to a direct connection to the same database, for what needs a session`;
}

// Every statement through DATABASE_URL must be bounded as STATEMENT_TIMEOUT_MS says. Sent as a
// startup parameter, it is there unless something between dropped it (a pooler told to ignore
// it, which then pools transactions too); behind a pooler it must come from the database or role.
export async function checkStatementBound(sql: Sql, config: Config): Promise<void> {
  const [row] = await sql<{ ms: number }[]>`select setting::int as ms from pg_settings where name = 'statement_timeout'`;
  const ms = row!.ms;
  const wanted = config.STATEMENT_TIMEOUT_MS;
  const reads = ms === 0 ? 'off' : `${ms} ms`;
  if (!behindPooler(config)) {
    if (ms === wanted) return;
    throw new Error(
      `DATABASE_URL did not pass on the statement bound sent when connecting (statement_timeout reads ${reads}, STATEMENT_TIMEOUT_MS is ${wanted}): a connection pooler that drops startup parameters? Behind a transaction pooler set DATABASE_DIRECT_URL to a direct connection to the same database.`,
    );
  }
  if (ms > 0 && ms <= wanted) return;
  throw new Error(
    `Through the pooler (DATABASE_URL) statement_timeout reads ${reads}, not bounded by STATEMENT_TIMEOUT_MS (${wanted}): a pooler passes no bound per connection, so set it on the database, ALTER DATABASE … SET statement_timeout = '${wanted}ms' (or on the service's role).`,
  );
}
