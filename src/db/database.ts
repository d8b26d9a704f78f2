import type { Config } from '../config';
import type { Logger } from '../log';
import { connect, type Sql } from './connect';
import { startEmbedded } from './embedded';
import { migrate } from './migrate';
import { behindPooler, checkStatementBound, poolerRefusal, requestPoolOptions } from './pooler';

export type Database = { sql: Sql; url: string; close: () => Promise<void> };

// DATABASE_URL when it is set, otherwise the embedded server under DATA_DIR; migrated either way.
// A database that cannot be reached stops the start with a sentence that says which and why.
// With DATABASE_DIRECT_URL, DATABASE_URL is a transaction pooler (pooler.ts): the pool prepares
// nothing and sends no statement bound, and its LISTENs, wherever in the service they are made,
// and the migration go over the direct connection.
export async function openDatabase(config: Config, log: Logger): Promise<Database> {
  const embedded = config.DATABASE_URL
    ? null
    : await startEmbedded(config.DATA_DIR, config.EMBEDDED_PG_PORT, log);
  const url = config.DATABASE_URL ?? embedded!.url;
  const pooled = behindPooler(config);
  const sql = connect(url, config.DB_POOL_SIZE, config.DB_CONNECT_TIMEOUT_S, requestPoolOptions(config));
  // postgres.js opens its one LISTEN connection with its own settings when first asked; this
  // instance is never queried, so that connection is all it holds. Named in pg_stat_activity.
  const listening = pooled ? connect(config.DATABASE_DIRECT_URL!, 1, config.DB_CONNECT_TIMEOUT_S, { applicationName: 'agent-messaging-service: LISTEN' }) : null;
  if (listening) sql.listen = listening.listen;
  const close = async () => {
    await sql.end({ timeout: 5 });
    await listening?.end({ timeout: 5 });
    await embedded?.stop();
  };
  const which = embedded ? 'the embedded PostgreSQL under DATA_DIR' : 'DATABASE_URL';
  try {
    await waitWhileBusy(log, async () => {
      await reach(sql, url, which, config);
      await checkStatementBound(sql, config);
      if (!pooled) return await migrate(sql, url);
      const direct = config.DATABASE_DIRECT_URL!;
      const session = connect(direct, 1, config.DB_CONNECT_TIMEOUT_S);
      try {
        await reach(session, direct, 'DATABASE_DIRECT_URL', config);
        await migrate(session, direct);
      } finally {
        await session.end({ timeout: 5 });
      }
    });
  } catch (error) {
    await close().catch(() => {});
    throw error;
  }
  return { sql, url, close };
}

async function reach(sql: Sql, url: string, which: string, config: Config): Promise<void> {
  await sql`select 1`.catch((error: unknown) => {
    if (isBusy(error)) throw error;
    throw new Error(`Could not connect to PostgreSQL at ${address(url)} (${which}): ${unreachable(error, config)}.`);
  });
}

// PostgreSQL out of connections (too_many_connections) or still starting (cannot_connect_now):
// both pass by themselves, as other clients let go or the server comes up, so a starting instance
// waits for them, saying so, rather than exiting to be restarted into the same refusal. Every step
// of a start that opens a connection (the first query and the migration, each LISTEN, the worker's
// pool and its first statements) goes through here, and each must leave nothing behind when it fails.
const BUSY = new Set(['53300', '57P03']);
const isBusy = (error: unknown) => BUSY.has((error as { code?: unknown } | null)?.code as string);
const BUSY_RETRY_FIRST_MS = 250;
const BUSY_RETRY_MAX_MS = 5_000;

export async function waitWhileBusy<T>(log: Logger, step: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (error) {
      if (!isBusy(error)) throw error;
      const retryInMs = Math.min(BUSY_RETRY_FIRST_MS * 2 ** (attempt - 1), BUSY_RETRY_MAX_MS);
      log.warn('database_busy', { attempt, error: (error as Error).message, retryInMs });
      await Bun.sleep(retryInMs);
    }
  }
}

// Host and port only: the URL may hold a password.
function address(url: string): string {
  try {
    const { hostname, port } = new URL(url);
    return `${hostname}:${port || 5432}`;
  } catch {
    return 'the address given';
  }
}

function unreachable(error: unknown, config: Config): string {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'ECONNREFUSED') return 'nothing is listening on that port';
  if (code === 'CONNECT_TIMEOUT') return `no answer within ${config.DB_CONNECT_TIMEOUT_S} s (DB_CONNECT_TIMEOUT_S)`;
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'no such host';
  const pooler = poolerRefusal(error);
  if (pooler) return pooler;
  // PostgreSQL's own refusals (no such role or database, a wrong password) are sentences already.
  return error instanceof Error ? error.message : String(error);
}
