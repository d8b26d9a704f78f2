import type { Sql } from '../../db/connect';
import { invalid } from './errors';
import { isId } from './ids';
import { PAGE } from './limits';
import type { Page } from './schemas';

// The dashboard's lists are shown newest first and paged by key, never by offset: `after` (the
// cursor the previous page answered, exclusive) reads the next older page however much arrives
// meanwhile, and `since` (an id on screen, inclusive) reads again everything from the top down to
// it, which is how a live page refreshes what it shows without losing the older pages it loaded.
export type PageQuery = { after: string | null; since: string | null; limit: number };

function idParameter(raw: unknown, name: string): string | null {
  if (raw === undefined || raw === null || raw === '') return null;
  if (!isId(raw)) throw invalid(`${name} must be an id taken from the list`);
  return raw;
}

// From query values: a bad `limit` means the page size, one above the window means the window.
export function pageQuery(raw: Record<string, unknown>): PageQuery {
  const n = typeof raw.limit === 'string' && /^\d+$/.test(raw.limit) ? Number(raw.limit) : NaN;
  return {
    after: idParameter(raw.after, 'after'),
    since: idParameter(raw.since, 'since'),
    limit: Number.isInteger(n) && n >= 1 ? Math.min(n, PAGE.window) : PAGE.size,
  };
}

// The key conditions on `column`, each preceded by `and`, for a list ordered by it descending and
// cut at limit + 1.
export const keyBounds = (sql: Sql, column: ReturnType<Sql>, page: PageQuery) => sql`
  ${page.after ? sql`and ${column} < ${page.after}` : sql``}
  ${page.since ? sql`and ${column} >= ${page.since}` : sql``}`;

// One row more than the page was read, to tell whether there is a next one.
export function pageOf<T>(rows: T[], limit: number, key: (item: T) => string): Page<T> {
  const items = rows.slice(0, limit);
  return { items, next: rows.length > limit ? key(items.at(-1)!) : null };
}
