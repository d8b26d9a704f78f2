import type { Config } from '../config';
import type { Logger } from '../log';
import { connect, type Sql } from './connect';
import { startEmbedded } from './embedded';
import { migrate } from './migrate';

export type Database = { sql: Sql; url: string; close: () => Promise<void> };

// DATABASE_URL when it is set, otherwise the embedded server under DATA_DIR; migrated either way.
export async function openDatabase(config: Config, log: Logger): Promise<Database> {
  const embedded = config.DATABASE_URL
    ? null
    : await startEmbedded(config.DATA_DIR, config.EMBEDDED_PG_PORT, log);
  const url = config.DATABASE_URL ?? embedded!.url;
  const sql = connect(url, config.DB_POOL_SIZE, config.DB_CONNECT_TIMEOUT_S);
  await migrate(sql, url);
  return {
    sql,
    url,
    close: async () => {
      await sql.end({ timeout: 5 });
      await embedded?.stop();
    },
  };
}
