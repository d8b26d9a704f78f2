import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { contractions, statements } from './support/expand-only';
import { git, previousRelease, ROOT } from './support/releases';

// Migrations and the previous release (docs/guides/upgrade.md): what a release shipped never changes,
// and what came after it only adds. The previous release running on the new schema is driven for
// real by test-upgrade/.
const release = previousRelease();
const sqlDir = join(ROOT, 'sql');
const current = readdirSync(sqlDir).filter((f) => f.endsWith('.sql')).toSorted();
const released = git(['ls-tree', '--name-only', `${release.commit}:sql`]).split('\n').filter((f) => f.endsWith('.sql'));

test('the release the CHANGELOG names is the tagged one, where this clone has the tag', () => {
  const tags = git(['tag', '--list', `v${release.version}`]).trim();
  const tagged = tags ? git(['rev-list', '-n', '1', `v${release.version}`]).trim() : release.commit;
  expect(tagged).toBe(release.commit);
});

test('every migration of the previous release is still here, byte for byte', () => {
  const changed = released.filter((file) => !current.includes(file) || git(['show', `${release.commit}:sql/${file}`]) !== readFileSync(join(sqlDir, file), 'utf8'));
  expect(changed).toEqual([]);
});

test('migrations since the previous release only add', () => {
  const findings = current
    .filter((file) => !released.includes(file))
    .flatMap((file) => {
      const earlier = current.slice(0, current.indexOf(file)).map((f) => readFileSync(join(sqlDir, f), 'utf8')).join('\n');
      return contractions(readFileSync(join(sqlDir, file), 'utf8'), earlier).map((f) => `${file}: ${f.why}: ${f.statement}`);
    });
  expect(findings).toEqual([]);
});

describe('the expand-only check itself', () => {
  const earlier = 'create function notify_delivery() returns trigger language plpgsql as $$ begin return new; end $$;';
  const whys = (sql: string) => contractions(sql, earlier).map((f) => f.why);

  test('finds what breaks the previous release', () => {
    expect(whys('alter table deliveries drop column notified_at;')).toEqual(['drops something']);
    expect(whys('drop index deliveries_inbox_idx;')).toEqual(['drops something']);
    expect(whys('alter table threads rename column title to subject;')).toEqual(['renames something']);
    expect(whys('alter table messages alter column summary type varchar(100);')).toEqual(['changes a column type']);
    expect(whys('alter table messages alter column summary set not null;')).toEqual(['makes a column required']);
    expect(whys('alter table agents add column team text not null;')).toEqual(['adds a required column without a default']);
    expect(whys('alter table agents add constraint short check (length(username) < 10);')).toEqual(['adds a constraint old writes may break']);
    expect(whys('create unique index on threads (title);')).toEqual(['adds a uniqueness old writes may break']);
    expect(whys('delete from deliveries where step = \'failed\';')).toEqual(['deletes rows']);
    expect(whys('create or replace function notify_delivery() returns trigger language plpgsql as $$ begin return null; end $$;')).toEqual([
      'replaces a function the previous release runs',
    ]);
    expect(whys('create or replace function public.notify_delivery() returns trigger language plpgsql as $fn1$ begin return null; end $fn1$;')).toEqual([
      'replaces a function the previous release runs',
    ]);
    expect(whys('do $$ begin alter table agents drop column legacy; end $$;')).toEqual(['drops something']);
    expect(whys('alter table threads alter title type varchar(100);')).toEqual(['changes a column type']);
    expect(whys('alter table threads add unique (title);')).toEqual(['adds a constraint old writes may break']);
    expect(whys('create trigger refuse before insert on messages for each row execute function refuse();')).toEqual(['adds a trigger old writes run into']);
    expect(whys('alter table a add column b text; -- contract: not a reason for the next one\nalter table a drop column c;')).toEqual(['drops something']);
    expect(whys('/* $$ */ alter table a drop column c;')).toEqual(['drops something']);
  });

  test('lets through what only adds, and a contraction whose comment says why it is safe', () => {
    expect(whys('alter table agents add column team text;')).toEqual([]);
    expect(whys("alter table agents add column team text not null default 'none';")).toEqual([]);
    expect(whys('create index if not exists agents_team_idx on agents (team);')).toEqual([]);
    expect(whys('create table endpoint_health (url text primary key, failures int not null default 0);')).toEqual([]);
    expect(whys('create or replace function endpoint_seen() returns trigger language plpgsql as $$ begin delete from x; drop table y; return new; end $$;')).toEqual([]);
    expect(whys("-- contract: 0.1.0 never reads agents.legacy (dropped in 0.2.0's code first).\nalter table agents drop column legacy;")).toEqual([]);
    expect(whys("comment on column agents.team is 'it is dropped; -- not a comment';")).toEqual([]);
  });

  test('splits at semicolons outside quotes, function bodies and comments', () => {
    const split = statements("-- first\ncreate table a (b text default ';');\ncreate function f() returns int language sql as $fn$ select 1; $fn$;\n-- ; in a comment\nselect 2;");
    expect(split.map((s) => [s.leading, s.body])).toEqual([
      ['-- first\n', "create table a (b text default ';')"],
      ['', 'create function f() returns int language sql as  $body$'],
      ['-- ; in a comment\n', 'select 2'],
    ]);
    expect(statements("select 'never closed; drop table x")).toEqual([{ leading: '', body: "select 'never closed; drop table x" }]);
  });
});
