import { expect, test } from 'bun:test';
import type { TransactionSql } from 'postgres';
import { migrate, migrations } from '../src/db/migrate';
import { uniqueName, useHarness } from './support/harness';

const h = useHarness();

test('migrations are recorded and applying them again changes nothing', async () => {
  await migrate(h.db.sql, h.db.url);
  await Promise.all([migrate(h.db.sql, h.db.url), migrate(h.db.sql, h.db.url)]);
  const rows = await h.db.sql`select name from schema_migrations order by name`;
  expect(rows.map((r) => r.name)).toEqual(migrations.map((m) => m.name));
  const [jobs] = await h.db.sql`select to_regclass('graphile_worker._private_jobs') is not null as installed`;
  expect(jobs!.installed).toBe(true);
});

// Ids must be RFC 9562 version 7 and sort in creation order, on PostgreSQL 18's own uuidv7() and
// on the PL/pgSQL fallback that older servers get (forced here, in a transaction rolled back).
const uuidV7Variants: [string, (migration: string) => string, (version: number) => string][] = [
  ['this server', (m) => m, (version) => (version >= 180000 ? 'sql' : 'plpgsql')],
  ['the fallback before PostgreSQL 18', (m) => m.replace('>= 180000', '>= 990000'), () => 'plpgsql'],
];

test.each(uuidV7Variants)('uuid_v7() on %s: version 7, the current time, in creation order', async (_name, variant, expectedLanguage) => {
  const migration = migrations.find((m) => m.name === '005_uuid_v7_without_parsing')!;
  const made: string[] = [];
  let found: { language: string; version: number } | undefined;
  const rollback = new Error('rollback');
  await h.db.sql
    .begin(async (tx) => {
      await tx.unsafe(variant(migration.sql));
      [found] = await tx<{ language: string; version: number }[]>`
        select l.lanname as language, current_setting('server_version_num')::int as version
        from pg_proc p join pg_language l on l.oid = p.prolang where p.proname = 'uuid_v7'`;
      const before = Date.now();
      for (let i = 0; i < 50; i++) made.push((await tx`select uuid_v7()::text as id`)[0]!.id);
      const after = Date.now();
      for (const id of made) {
        const hex = id.replaceAll('-', '');
        expect(hex[12]).toBe('7');
        expect('89ab').toContain(hex[16]!);
        const ms = parseInt(hex.slice(0, 12), 16);
        expect(ms).toBeGreaterThanOrEqual(before - 1_000);
        expect(ms).toBeLessThanOrEqual(after + 1_000);
      }
      throw rollback;
    })
    .catch((error: Error) => {
      if (error !== rollback) throw error;
    });
  expect(found!.language).toBe(expectedLanguage(found!.version));
  expect(made).toHaveLength(50);
  expect(made.toSorted()).toEqual(made);
  expect(new Set(made).size).toBe(50);
});

// Runs 006_usernames on a database as it was before it, holding `before`'s rows, in a transaction
// rolled back afterwards; returns the claims it made.
async function claimsFromUsernamesMigration(before: (tx: TransactionSql) => Promise<unknown>) {
  const migration = migrations.find((m) => m.name === '006_usernames')!;
  const rollback = new Error('rollback');
  let claims: { username: string; owner: string }[] = [];
  await h.db.sql
    .begin(async (tx) => {
      await tx`alter table agents drop column username_owner`;
      await tx`alter table people drop column username_owner`;
      await tx`drop table usernames`;
      await before(tx);
      await tx.unsafe(migration.sql);
      claims = [...(await tx<{ username: string; owner: string }[]>`select username, owner from usernames order by username`)];
      throw rollback;
    })
    .catch((error: Error) => {
      if (error !== rollback) throw error;
    });
  return claims;
}

test('the usernames migration claims every existing agent and person name for its owner', async () => {
  const claims = await claimsFromUsernamesMigration(async (tx) => {
    await tx`insert into agents (username, key_hash) values ('old-agent', '\\x01')`;
    await tx`insert into people (email, username) values ('old@example.com', 'old-person')`;
  });
  expect(claims).toEqual([
    { username: 'old-agent', owner: 'agent' },
    { username: 'old-person', owner: 'person' },
  ]);
});

test('the usernames migration refuses, naming them, names an agent and a person both hold', async () => {
  const migrating = claimsFromUsernamesMigration(async (tx) => {
    await tx`insert into agents (username, key_hash) values ('both-b', '\\x02'), ('both-a', '\\x03')`;
    await tx`insert into people (email, username) values ('a@example.com', 'both-a'), ('b@example.com', 'both-b')`;
  });
  await expect(migrating).rejects.toThrow(
    'These usernames belong to both an agent and a person: both-a, both-b. Rename one of each pair, then migrate again.',
  );
  const [count] = await h.db.sql`select count(*)::int as n from agents where username like 'both-%'`;
  expect(count!.n).toBe(0);
});

test('the thread-activity migration sets each thread to its latest opening, message, close request or close; later threads start at their opening', async () => {
  const migration = migrations.find((m) => m.name === '017_thread_activity')!;
  const rollback = new Error('rollback');
  let found: Record<string, string> = {};
  const { username } = await h.agent(uniqueName('activity'));
  await h.db.sql
    .begin(async (tx) => {
      await tx`alter table threads drop column last_activity_at`;
      const [opener] = await tx<{ id: string }[]>`select id from agents where username = ${username}`;
      const thread = async (title: string, state: string, created: string, requested: string | null, closed: string | null, said: string[]) => {
        const [row] = await tx<{ id: string }[]>`
          insert into threads (title, state, opened_by, created_at, close_requested_at, closed_at)
          values (${title}, ${state}::thread_state, ${opener!.id}, ${created}, ${requested}, ${closed}) returning id`;
        for (const at of said) {
          await tx`insert into messages (thread_id, sender_agent_id, sender, content, created_at) values (${row!.id}, ${opener!.id}, ${username}, 'x', ${at}::text::timestamptz)`;
        }
      };
      await thread('quiet', 'open', '2020-01-01 10:00:00+00', null, null, []);
      // The newest by time, not by id: a message written later can carry an earlier time. (Times go
      // as text: the driver would make Dates of them, to the millisecond.)
      await thread('talked', 'open', '2020-01-01 10:00:00+00', null, null, ['2020-01-01 10:07:30.123456+00', '2020-01-01 10:05:00+00']);
      await thread('asked', 'close-pending', '2020-01-01 10:00:00+00', '2020-01-01 10:06:00+00', null, ['2020-01-01 10:05:00+00']);
      await thread('closed', 'closed', '2020-01-01 10:00:00+00', '2020-01-01 10:06:00+00', '2020-01-01 10:08:00+00', ['2020-01-01 10:05:00+00']);
      await tx.unsafe(migration.sql);
      // As the previous release opens a thread, without naming the column.
      await tx`insert into threads (title, opened_by) values ('opened by the previous release', ${opener!.id})`;
      const rows = await tx<{ title: string; at: string }[]>`
        select title, case when title like 'opened by%' then (last_activity_at = created_at)::text
                           else to_char(last_activity_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') end as at
        from threads`;
      found = Object.fromEntries(rows.map((r) => [r.title, r.at]));
      throw rollback;
    })
    .catch((error: Error) => {
      if (error !== rollback) throw error;
    });
  expect(found).toEqual({
    quiet: '2020-01-01 10:00:00.000000',
    talked: '2020-01-01 10:07:30.123456',
    asked: '2020-01-01 10:06:00.000000',
    closed: '2020-01-01 10:08:00.000000',
    'opened by the previous release': 'true',
  });
});
