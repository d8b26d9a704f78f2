import type { PendingQuery, Row } from 'postgres';
import type { Queries, Sql } from '../../db/connect';
import type { SearchGate } from '../shared/search-gate';
import type { Actor } from '../agents/actors';
import { invalid } from '../shared/errors';
import { isId } from '../shared/ids';
import { listLimit } from '../shared/limits';
import { LIMITS, type MessageSearchHit, type MessageSearchResults } from '../shared/schemas';
import { searchText } from '../shared/search';
import { agentSeesThread, threadNotFound, threadsAgentSees } from '../threads/visibility';
import { oneLine, shortened } from './summary-line';

// Full-text search over the messages an agent can see (sql/020_message_search.sql holds the index
// and says why its text-search configuration is 'simple' with accents folded). The query is
// PostgreSQL's websearch syntax: words (all must appear), "quoted phrases", -excluded, or.

// The one reading of a query, for agents and for the dashboard alike.
const tsquery = (sql: Queries, text: string) => sql`websearch_to_tsquery('ams_search', ${text})`;

// A row when the message `messageId` (a column) matches `text` in its title, summary or content:
// tested row by row, as a list read newest first until a page is full needs it (a set of every
// match would be millions of ids for a common word). A query that the index cannot answer (only
// exclusions, or no words at all) matches nothing; PostgreSQL decides that once, while planning.
export const messageMatches = (sql: Queries, messageId: PendingQuery<Row[]>, text: string) => sql`
  select 1 from message_search ms
  where ms.message_id = ${messageId} and querytree(${tsquery(sql, text)}) not in ('', 'T') and ms.document @@ ${tsquery(sql, text)}`;

export type MessageSearch = { text: string; threadId: string | null; limit: number; after: SearchCursor | null };

// Where a page ends: the last result's rank and id. Opaque to clients, as `<rank>_<id>`; the rank
// (a real) printed as a double, whose digits read back to the same real at any extra_float_digits
// from -6 up (PostgreSQL's default is 1; nothing here lowers it).
type SearchCursor = { rank: string; id: string };
const CURSOR = /^(\d+(?:\.\d+)?(?:e-\d+)?)_([0-9a-f-]{36})$/;

// The smallest normal single-precision number: a real below it is out of range on PostgreSQL 15.
const SMALLEST_REAL = 1.1754943508222875e-38;

const NO_WORDS =
  'q has no words to search for: give at least one word that is not excluded with -';

// From query values or tool arguments: `q` required (at most 200 characters), `threadId` to keep
// to one thread, `limit` by the rule of every list, `after` the `next` of the previous page.
export function messageSearch(raw: Record<string, unknown>): MessageSearch {
  const text = searchText(raw.q);
  if (text === null) throw invalid('q is required: the words to search for', 'q');
  const threadId = raw.threadId === undefined || raw.threadId === null || raw.threadId === '' ? null : raw.threadId;
  if (threadId !== null && !isId(threadId)) throw threadNotFound();
  let after: SearchCursor | null = null;
  if (raw.after !== undefined && raw.after !== null && raw.after !== '') {
    const match = typeof raw.after === 'string' ? CURSOR.exec(raw.after) : null;
    // A rank is a PostgreSQL real: a number it cannot hold (too large, or so small that it is not
    // zero and reads back as zero or as a denormal, which PostgreSQL 15 refuses) was never a rank
    // it answered.
    const rank = match ? Math.fround(Number(match[1])) : NaN;
    const zero = match !== null && !/[1-9]/.test(match[1]!);
    if (!match || !isId(match[2]) || !Number.isFinite(rank) || (zero ? rank !== 0 : rank < SMALLEST_REAL)) {
      throw invalid('after must be the next value of the previous page', 'after');
    }
    after = { rank: match[1]!, id: match[2] };
  }
  return { text, threadId, limit: listLimit(raw.limit), after };
}

// What an excerpt marks: each word the query looks for (not one it excludes), wherever it stands,
// as any of them. Never the query itself: on PostgreSQL 15 ts_headline's time and memory double
// with each word of a phrase whose words repeat in the message (14 words of one repeated word took
// a backend past 1.5 GB), and even where they do not, a phrase or many words joined by "and" cost
// it a pass over the message per possible match. Words joined by "or" cost one pass. The words are
// taken from the query's own text, where each is quoted ('it''s'), so that they are read back the
// same.
const highlighted = (sql: Queries, query: PendingQuery<Row[]>) => sql`
  (select string_agg(distinct w[1], ' | ')::tsquery from regexp_matches(querytree(${query})::text, '''(?:[^'']|'''')*''', 'g') w)`;

type HitRow = {
  messageId: string;
  threadId: string;
  threadTitle: string;
  sender: string;
  createdAt: Date;
  summary: string | null;
  // Read only when there is no summary to show instead (such a message is short).
  content: string | null;
  excerpt: string;
  cursor: string;
};

// How long an excerpt may be, in characters: a few lines around the matches, on one line (an
// over-long word or URL is cut).
const EXCERPT_MAX = 300;

// Best match first (ts_rank, shorter messages above long ones that mention the words in passing),
// the newer first among equals. Records no read: only reading a message does. Runs under the
// search bounds (search-gate.ts): `abort` is the caller's request.
export function searchMessages(searches: SearchGate, actor: Actor, search: MessageSearch, abort?: AbortSignal): Promise<MessageSearchResults> {
  return searches.run(actor.id, abort, (tx) => searchWithin(tx, actor, search));
}

async function searchWithin(tx: Queries, actor: Actor, search: MessageSearch): Promise<MessageSearchResults> {
  const [check] = await tx<{ searchable: boolean; visible: boolean }[]>`
    select querytree(${tsquery(tx, search.text)}) not in ('', 'T') as searchable,
           ${search.threadId ? agentSeesThread(tx, tx`${search.threadId}::uuid`, actor.id) : tx`true`} as visible`;
  if (!check!.visible) throw threadNotFound();
  if (!check!.searchable) throw invalid(NO_WORDS, 'q');
  const rows = await tx<HitRow[]>`
    select page.message_id as "messageId", page.thread_id as "threadId", t.title as "threadTitle", m.sender,
           m.created_at as "createdAt", m.summary, case when m.summary is null then m.content end as content,
           ts_headline('ams_search', m.content, page.highlight,
                       'StartSel=**, StopSel=**, MaxWords=30, MinWords=12, ShortWord=2, MaxFragments=2, FragmentDelimiter=" … "') as excerpt,
           page.rank::float8::text || '_' || page.message_id::text as cursor
    from (
      select hit.message_id, hit.thread_id, hit.rank, hit.highlight
      from (
        select ms.message_id, ms.thread_id, ts_rank(ms.document, q.query, 1) as rank, q.highlight
        from message_search ms, (select query, ${highlighted(tx, tx`query`)} as highlight from (select ${tsquery(tx, search.text)} as query) t) q
        where ms.document @@ q.query
          and ${search.threadId ? tx`ms.thread_id = ${search.threadId} and ${agentSeesThread(tx, tx`ms.thread_id`, actor.id)}` : tx`ms.thread_id = any(array(${threadsAgentSees(tx, actor.id)}))`}
      ) hit
      where true ${search.after ? tx`and (hit.rank, hit.message_id) < (${search.after.rank}::real, ${search.after.id}::uuid)` : tx``}
      order by hit.rank desc, hit.message_id desc
      limit ${search.limit + 1}
    ) page
    join messages m on m.id = page.message_id
    join threads t on t.id = page.thread_id
    order by page.rank desc, page.message_id desc`;
  const results: MessageSearchHit[] = rows.slice(0, search.limit).map((r) => ({
    messageId: r.messageId,
    threadId: r.threadId,
    threadTitle: r.threadTitle,
    sender: r.sender,
    createdAt: r.createdAt.toISOString(),
    summary: r.summary ?? oneLine(null, r.content!, LIMITS.summary),
    excerpt: shortened(r.excerpt, EXCERPT_MAX),
  }));
  return { results, next: rows.length > search.limit ? rows[search.limit - 1]!.cursor : null };
}

// Indexes, a batch at a time, the messages that were there before search was (the migration
// records how far to go; every later message is indexed by its own insert). A batch is one short
// statement that claims the walk's row, so that workers running it together take turns rather
// than doing each other's work. Stops when the walk is done, another worker holds it, or after
// `forMs`, to go on at the next run.
export async function indexOlderMessages(sql: Sql, forMs: number, batch = 2_000): Promise<{ indexed: number; done: boolean }> {
  const until = performance.now() + forMs;
  let indexed = 0;
  for (;;) {
    const [step] = await sql<{ claimed: boolean; indexed: number; done: boolean }[]>`
      with walk as (
        select up_to, indexed_through from message_search_backfill where done_at is null for update skip locked
      ), batch as (
        -- Bounds as values, so that the scan starts where the walk stands; each row held until the
        -- batch commits, so that retention deleting it meanwhile waits instead of failing the batch
        -- (both lock in id order, so neither waits for the other in a cycle).
        select m.id, m.thread_id, m.summary, m.content from messages m
        where m.id <= (select up_to from walk)
          and m.id > coalesce((select indexed_through from walk), '00000000-0000-0000-0000-000000000000')
        order by m.id limit ${batch}
        for key share of m
      ), added as (
        insert into message_search (message_id, thread_id, document)
        select b.id, b.thread_id, message_document(t.title, b.summary, b.content) from batch b join threads t on t.id = b.thread_id
        on conflict (message_id) do nothing
        returning 1
      ), moved as (
        update message_search_backfill
        set indexed_through = coalesce((select id from batch order by id desc limit 1), walk.indexed_through),
            done_at = case when (select count(*) from batch) < ${batch} then now() end
        from walk
        returning done_at
      )
      select exists (select 1 from walk) as claimed, (select count(*) from added)::int as indexed,
             case when exists (select 1 from walk) then (select done_at is not null from moved)
                  else (select done_at is not null from message_search_backfill) end as done`;
    indexed += step!.indexed;
    if (!step!.claimed || step!.done || performance.now() >= until) return { indexed, done: step!.done };
  }
}
