import type { Queries } from '../../db/connect';
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
export const keyBounds = (sql: Queries, column: ReturnType<Queries>, page: PageQuery) => sql`
  ${page.after ? sql`and ${column} < ${page.after}` : sql``}
  ${page.since ? sql`and ${column} >= ${page.since}` : sql``}`;

// One row more than the page was read, to tell whether there is a next one.
export function pageOf<T>(rows: T[], limit: number, key: (item: T) => string): Page<T> {
  const items = rows.slice(0, limit);
  return { items, next: rows.length > limit ? key(items.at(-1)!) : null };
}

// A list ordered by a time that changes (a thread's last activity), then by id, both descending:
// an id alone no longer says where an item stands, so its cursor carries both, as
// `<microseconds since 1970>_<id>` (the database's full precision: a millisecond would tie items
// that differ). It is opaque to clients: they pass back what the list answered.
export type TimeKey = { at: string; id: string };
export type TimeKeyedPageQuery = { after: TimeKey | null; since: TimeKey | null; limit: number };

const TIME_KEY = /^(\d{1,16})_([0-9a-f-]{36})$/;

function timeKeyParameter(raw: unknown, name: string): TimeKey | null {
  if (raw === undefined || raw === null || raw === '') return null;
  const match = typeof raw === 'string' ? TIME_KEY.exec(raw) : null;
  if (!match || !isId(match[2])) throw invalid(`${name} must be a cursor taken from the list`);
  const micros = BigInt(match[1]!);
  const ms = new Date(Number(micros / 1000n)).toISOString();
  return { at: `${ms.slice(0, -1)}${String(micros % 1000n).padStart(3, '0')}Z`, id: match[2] };
}

// From query values, as pageQuery reads them.
export function timeKeyedPageQuery(raw: Record<string, unknown>): TimeKeyedPageQuery {
  return { after: timeKeyParameter(raw.after, 'after'), since: timeKeyParameter(raw.since, 'since'), limit: pageQuery({ limit: raw.limit }).limit };
}

// The cursor of a row, from its time and id columns.
export const timeKeyOf = (sql: Queries, at: ReturnType<Queries>, id: ReturnType<Queries>) => sql`
  (extract(epoch from ${at}) * 1000000)::bigint::text || '_' || ${id}::text`;

// The key conditions on (at, id), each preceded by `and`, for a list ordered by both descending and
// cut at limit + 1: `after` exclusive, `since` inclusive, as keyBounds. The time is sent as text:
// sent as a timestamp, the driver would make a Date of it, which keeps milliseconds only.
export const timeKeyBounds = (sql: Queries, at: ReturnType<Queries>, id: ReturnType<Queries>, page: TimeKeyedPageQuery) => sql`
  ${page.after ? sql`and (${at}, ${id}) < (${page.after.at}::text::timestamptz, ${page.after.id}::uuid)` : sql``}
  ${page.since ? sql`and (${at}, ${id}) >= (${page.since.at}::text::timestamptz, ${page.since.id}::uuid)` : sql``}`;
