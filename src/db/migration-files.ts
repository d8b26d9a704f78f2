import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export type Migration = { name: string; sql: string };

// NNN_words_in_snake_case.sql: the number orders the files, the name without `.sql` is what
// schema_migrations records, so a file is never renamed once it has been deployed.
export const MIGRATION_FILE = /^(\d{3})_[a-z0-9]+(?:_[a-z0-9]+)*\.sql$/;

export const MIGRATIONS_DIR = resolve(import.meta.dir, '../../sql');

// Every file in sql/, in the order they apply. migrate.ts imports this as a macro, so it runs when
// Bun transpiles migrate.ts (`bun run`, `bun test`) or bundles it (`bun build --compile`) and the
// list is written into the code: the executable carries the migrations and needs no sql/ beside it.
// A file that does not follow the naming cannot be placed in the order, so it stops the build (and
// the start, and the tests).
export function readMigrations(dir: string = MIGRATIONS_DIR): Migration[] {
  const files = readdirSync(dir).toSorted();
  const misnamed = files.filter((file) => !MIGRATION_FILE.test(file));
  if (misnamed.length > 0) {
    const message = `${dir} holds only migrations named NNN_words.sql; rename or move: ${misnamed.join(', ')}.`;
    // Bun reports an exception thrown by a macro without its message.
    console.error(message);
    throw new Error(message);
  }
  return files.map((file) => ({ name: file.slice(0, -'.sql'.length), sql: readFileSync(join(dir, file), 'utf8') }));
}
