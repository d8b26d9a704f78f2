import { expect, test } from 'bun:test';
import { migrate, migrations } from '../src/db/migrate';
import { useHarness } from './support/harness';

const h = useHarness();

test('migrations are recorded and applying them again changes nothing', async () => {
  await migrate(h.db.sql, h.db.url);
  await Promise.all([migrate(h.db.sql, h.db.url), migrate(h.db.sql, h.db.url)]);
  const rows = await h.db.sql`select name from schema_migrations order by name`;
  expect(rows.map((r) => r.name)).toEqual(migrations.map((m) => m.name));
  const [jobs] = await h.db.sql`select to_regclass('graphile_worker._private_jobs') is not null as installed`;
  expect(jobs!.installed).toBe(true);
});
