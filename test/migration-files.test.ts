import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrations } from '../src/db/migrate';
import { MIGRATION_FILE, MIGRATIONS_DIR, readMigrations } from '../src/db/migration-files';
import { createTestDatabase, type TestDatabase } from './support/database';
import { emptyDatabase } from './support/empty-database';

// Numbers no migration has, and why. No file numbered 009 or 012 was ever committed (`git log
// --all -- sql/`): numbers were picked on branches worked on side by side (010 was committed before
// 006 and 007) and these two were left unused. The files after them keep their numbers, because
// schema_migrations records every applied migration by its name: renamed, a migration would run a
// second time on every database already deployed.
const NUMBERS_LEFT_UNUSED = ['009', '012'];

// What is wrong with the numbering of these file names: a name that is not NNN_words.sql, a number
// taken twice, a number skipped (other than those history left), or one of those taken now. A new
// migration takes the number after the highest: a lower one would apply before older files on a
// new database but after them on a deployed one.
function numberingProblems(files: string[]): string[] {
  const problems: string[] = [];
  const byNumber = new Map<string, string[]>();
  for (const file of files) {
    const number = MIGRATION_FILE.exec(file)?.[1];
    if (number === undefined) problems.push(`${file} is not named NNN_words.sql`);
    else byNumber.set(number, [...(byNumber.get(number) ?? []), file]);
  }
  const highest = Math.max(0, ...[...byNumber.keys()].map(Number));
  for (let n = 1; n <= highest; n++) {
    const number = String(n).padStart(3, '0');
    const holders = byNumber.get(number) ?? [];
    if (holders.length > 1) problems.push(`${number} is taken by ${holders.join(' and ')}`);
    if (holders.length === 0 && !NUMBERS_LEFT_UNUSED.includes(number)) problems.push(`${number} is missing`);
    if (holders.length > 0 && NUMBERS_LEFT_UNUSED.includes(number)) {
      problems.push(`${holders.join(' and ')} takes ${number}, which history left unused; take ${String(highest + 1).padStart(3, '0')}`);
    }
  }
  return problems;
}

const files = readdirSync(MIGRATIONS_DIR);

test('the migrations are the files in sql/, in the order of their numbers, each as written', () => {
  const byNumber = files.toSorted((a, b) => parseInt(a, 10) - parseInt(b, 10));
  expect(migrations.map((m) => `${m.name}.sql`)).toEqual(byNumber);
  for (const m of migrations) expect(m.sql).toBe(readFileSync(join(MIGRATIONS_DIR, `${m.name}.sql`), 'utf8'));
});

test('migration numbers run from 001 with no gap but 009 and 012, none taken twice', () => {
  expect(numberingProblems(files)).toEqual([]);
});

test('the numbering check refuses a new gap, a number taken twice, a bad name and a number history left', () => {
  // Numbers after the highest in sql/, so the cases hold as migrations are added.
  const n = (k: number) => String(Math.max(...files.map((f) => parseInt(f, 10))) + k).padStart(3, '0');
  expect(numberingProblems([...files, `${n(2)}_next.sql`])).toEqual([`${n(1)} is missing`]);
  expect(numberingProblems([...files, `${n(1)}_one.sql`, `${n(1)}_other.sql`])).toEqual([`${n(1)} is taken by ${n(1)}_one.sql and ${n(1)}_other.sql`]);
  expect(numberingProblems([...files, `${n(1)}-next.sql`, '16_next.sql', `${n(1)}_Next.sql`, 'notes.md'])).toEqual([
    `${n(1)}-next.sql is not named NNN_words.sql`,
    '16_next.sql is not named NNN_words.sql',
    `${n(1)}_Next.sql is not named NNN_words.sql`,
    'notes.md is not named NNN_words.sql',
  ]);
  expect(numberingProblems([...files, '009_late.sql'])).toEqual([`009_late.sql takes 009, which history left unused; take ${n(1)}`]);
});

test('a file in sql/ that is not named NNN_words.sql stops the discovery, which says which', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ams-migrations-'));
  const printed = spyOn(console, 'error').mockImplementation(() => {});
  try {
    writeFileSync(join(dir, '001_first.sql'), 'select 1;');
    writeFileSync(join(dir, 'notes.md'), 'not a migration');
    const message = `${dir} holds only migrations named NNN_words.sql; rename or move: notes.md.`;
    expect(() => readMigrations(dir)).toThrow(message);
    // Bun drops the message of an exception thrown by a macro, so the discovery prints it too.
    expect(printed).toHaveBeenCalledWith(message);
  } finally {
    printed.mockRestore();
    rmSync(dir, { recursive: true });
  }
});

// Each file applied to a database with nothing in it, in order, one test per file: a file that
// does not apply on top of the ones before it fails under its own name.
describe('on an empty database, every migration applies in order', () => {
  let empty: TestDatabase;
  beforeAll(async () => {
    // The test server's address, from a clone of the migrated template that is not used otherwise.
    const clone = await createTestDatabase();
    await clone.drop();
    empty = await emptyDatabase(clone.url);
  });
  afterAll(() => empty.drop());

  test.each(migrations.map((m) => [m.name, m.sql]))('%s', async (_name, sql) => {
    await empty.sql.unsafe(sql);
  });
});
