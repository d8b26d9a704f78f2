// `bun bench/scale.ts` (or `BENCH_ONLY=scale bun run bench`): what the agent API and the dashboard
// cost as the data grows. A fresh database is filled (set-based SQL, not the API) to each size in
// SCALE_SIZES (default 1 000 000 and 10 000 000 messages) with the shapes of a busy deployment:
// 2 000 agents, threads of two to four participants with about 20 messages each, one delivery per
// other participant, a month of traffic per million messages (so that a larger database is a
// longer history, not a busier day; the searching agent's own threads are all in the newest
// month, so that it sees the same at every size). At each size the domain's own calls (what each door runs,
// without HTTP) are timed one after another, SCALE_SAMPLES times (default 200) after a warm-up:
// p50 and p99 in milliseconds, and the ratio of the largest size to the smallest. Flat means a
// ratio near 1. Then, on the largest, what retention costs: one day of messages and of the attempt
// log deleted the way the hourly sweep deletes them. Results in bench/scale-results.json.
import postgres from 'postgres';
import { connect, onPrimary, type Sql } from '../src/db/connect';
import { overview } from '../src/domain/deliveries/overview';
import { deliveryFilter, NO_FILTER } from '../src/domain/deliveries/delivery-query';
import { listDeliveries } from '../src/domain/deliveries/delivery-progress';
import { inbox } from '../src/domain/deliveries/inbox';
import { messageReceipts } from '../src/domain/deliveries/receipts';
import { messageSearch, searchMessages } from '../src/domain/messages/message-search';
import { listMessages, postMessage } from '../src/domain/messages/messages';
import { pruneHistory } from '../src/domain/messages/retention';
import { pageQuery, timeKeyedPageQuery } from '../src/domain/shared/keyset';
import { searchGate } from '../src/domain/shared/search-gate';
import { listThreadsPage, threadFilter } from '../src/domain/threads/thread-overview';
import { listThreads, openThread } from '../src/domain/threads/threads';
import type { InboxSignal } from '../src/db/inbox-signal';
import { silentLogger } from '../src/log';
import { freshDatabases } from './fresh-database';
import { latencySummary, round } from './stats';

const SIZES = (process.env.SCALE_SIZES ?? '1000000,10000000').split(',').map(Number);
const SAMPLES = Number(process.env.SCALE_SAMPLES ?? 200);
const AGENTS = 2_000;
const MESSAGES_PER_THREAD = 20;
const DAY_MS = 86_400_000;
// A month of traffic per million messages.
const MS_PER_MESSAGE = (30 * DAY_MS) / 1_000_000;
const STALLED_AFTER_MS = 300_000;
const root = new URL('..', import.meta.url).pathname;
const started = performance.now();
const progress = (line: string) => process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${line}\n`);

// ---- words: a made-up vocabulary used with Zipf's law, as natural language is ----
const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'te', 'vo', 'di', 'po', 'ga', 'he', 'ji', 'ku', 'ma', 'no', 'pe', 'ri', 'so', 'tu', 'va', 'we', 'xi', 'yo', 'za', 'be', 'ci', 'fo', 'gu', 'la'];
const VOCABULARY = Array.from({ length: 5_000 }, (_, i) => {
  const a = SYLLABLES[i % 30]!;
  const b = SYLLABLES[Math.floor(i / 30) % 30]!;
  const c = i >= 900 ? SYLLABLES[Math.floor(i / 900) % 30]! : '';
  return `${a}${b}${c}`;
});
// Word k (from 0) is drawn with probability about 1 / ((k + 1) ln 5000).
const zipfWord = () => VOCABULARY[Math.min(VOCABULARY.length - 1, Math.floor(Math.exp(Math.random() * Math.log(VOCABULARY.length))) - 1)]!;
const paragraph = () => Array.from({ length: 6 + Math.floor(Math.random() * 25) }, zipfWord).join(' ');
const PARAGRAPHS = 20_000;
// Searched for: in about 35 % of messages, in about 0.4 %, and in 500 messages placed below
// (50 of them in the searching agent's threads), at every size.
const COMMON = VOCABULARY[9]!;
const MIDDLING = VOCABULARY[999]!;
const RARE = 'zeppelin';

// ---- the fill ----
const db = await freshDatabases();
// Fill statements run for minutes: a connection of their own, without the service's settings.
const admin = postgres(db.url, { max: 1, onnotice: () => {} });
const sql = connect(db.url, 4);

const INDEXED_TABLES = ['messages', 'deliveries', 'participants', 'threads', 'message_search', 'delivery_attempts'];

// Secondary indexes are dropped for a fill and built again after it, as a restore would: much
// faster than keeping each up to date row by row.
async function withoutSecondaryIndexes(fill: () => Promise<void>) {
  const indexes = await admin<{ name: string; definition: string }[]>`
    select i.indexrelid::regclass::text as name, pg_get_indexdef(i.indexrelid) as definition
    from pg_index i join pg_class t on t.oid = i.indrelid
    where t.relname = any(${INDEXED_TABLES}) and t.relnamespace = 'public'::regnamespace
      and not exists (select 1 from pg_constraint c where c.conindid = i.indexrelid)`;
  for (const index of indexes) await admin.unsafe(`drop index ${index.name}`);
  await fill();
  const built = performance.now();
  await admin.unsafe(`set maintenance_work_mem = '1GB'`);
  const seconds: Record<string, number> = {};
  for (const index of indexes) {
    const t = performance.now();
    await admin.unsafe(index.definition);
    seconds[index.name] = round((performance.now() - t) / 1000, 1);
  }
  progress(`indexes built in ${((performance.now() - built) / 1000).toFixed(0)} s: ${JSON.stringify(seconds)}`);
  return seconds;
}

// A UUIDv7 of the millisecond `ms`, unique by `n`.
const idOf = (ms: string, n: string, variant = '8') =>
  `(lpad(to_hex(${ms}), 12, '0') || '7' || lpad(to_hex(${n} & 4095), 3, '0') || '${variant}' || lpad(to_hex(${n}), 15, '0'))::uuid`;

// The bench's agents post and open far past the default quotas: counted, never refused.
const BENCH_QUOTA = 100_000_000;

async function prepare() {
  await admin`
    with claimed as (insert into usernames (username, owner) select 'agent-' || n, 'agent' from generate_series(1, ${AGENTS}::int) n returning username)
    insert into agents (username, key_hash, messages_per_minute, threads_per_hour)
    select username, sha256(('bench ' || username)::bytea), ${BENCH_QUOTA}, ${BENCH_QUOTA} from claimed`;
  await admin`create table bench_agents as select row_number() over (order by username)::int as n, id, username from agents`;
  await admin`alter table bench_agents add primary key (n)`;
  await admin`create table bench_paragraphs (n int primary key, text text not null)`;
  const texts = Array.from({ length: PARAGRAPHS }, paragraph);
  await admin`insert into bench_paragraphs select n, t from unnest(${texts}::text[]) with ordinality as x(t, n)`;
  await admin`create table bench_threads (n int primary key, id uuid not null, ms bigint not null, members int[] not null)`;
  await admin`create index bench_threads_id on bench_threads (id)`;
}

type Fill = { messages: number; threads: number; deliveries: number; fillSeconds: number; searchIndexSeconds: number; indexSeconds: Record<string, number> };

// Messages `from` to `from + count - 1` (by number), sent over the `count` message-times that end
// `endMs`; the threads they go to are new.
async function fill(from: number, count: number, endMs: number): Promise<Fill> {
  const startMs = endMs - Math.round(count * MS_PER_MESSAGE);
  // The older history is other agents': the searching agent and its partner (agents 1 and 2) take
  // part in the newest month only, so that what an agent can see stays the same at every size and
  // the figures show what the table's size costs, not a larger share of it.
  const [first, pool] = from === 0 ? [1, AGENTS] : [3, AGENTS - 2];
  const firstThread = from / MESSAGES_PER_THREAD + 1;
  const threads = count / MESSAGES_PER_THREAD;
  let searchIndexSeconds = 0;
  const t = performance.now();
  const indexSeconds = await withoutSecondaryIndexes(async () => {
    await admin.begin(async (tx) => {
      // Foreign keys are consistent by construction and the row triggers (events, search) would
      // double the fill's time: the search index is filled below as the worker fills it after an
      // upgrade.
      await tx`set local session_replication_role = replica`;
      await tx.unsafe(`
        insert into bench_threads (n, id, ms, members)
        select t, ${idOf('ms', 't', 'a')}, ms, case
            when c < 0.60 then array[${first} + r, ${first} + (r + d1) % ${pool}]
            when c < 0.85 then array[${first} + r, ${first} + (r + d1) % ${pool}, ${first} + (r + d1 + d2) % ${pool}]
            else array[${first} + r, ${first} + (r + d1) % ${pool}, ${first} + (r + d1 + d2) % ${pool}, ${first} + (r + d1 + d2 + d3) % ${pool}] end
        from (select t, ${startMs}::bigint + ((t - ${firstThread})::float8 * ${endMs - startMs} / ${threads})::bigint as ms, random() as c,
                     floor(random() * ${pool})::int as r, 1 + floor(random() * 600)::int as d1, 1 + floor(random() * 600)::int as d2,
                     1 + floor(random() * 600)::int as d3
              from generate_series(${firstThread}, ${firstThread + threads - 1}) t) x`);
      await tx.unsafe(`
        insert into threads (id, title, opened_by, created_at, last_activity_at)
        select bt.id, array_to_string((string_to_array(p.text, ' '))[1:4], ' '), a.id, to_timestamp(bt.ms / 1000.0), to_timestamp(bt.ms / 1000.0)
        from bench_threads bt join bench_agents a on a.n = bt.members[1] join bench_paragraphs p on p.n = 1 + bt.n % ${PARAGRAPHS}
        where bt.n >= ${firstThread}`);
      await tx.unsafe(`
        insert into participants (thread_id, agent_id, joined_at)
        select bt.id, a.id, now() - interval '400 days' from bench_threads bt cross join unnest(bt.members) m join bench_agents a on a.n = m
        where bt.n >= ${firstThread}`);
      await tx.unsafe(`
        with src as (
          select g, ${startMs}::bigint + ((g - ${from})::float8 * ${endMs - startMs} / ${count})::bigint as ms,
                 ${firstThread} + floor(random() * ${threads})::int as tn, 1 + floor(random() * ${PARAGRAPHS})::int as p1,
                 1 + floor(random() * ${PARAGRAPHS})::int as p2, random() as rs, random() as rsender
          from generate_series(${from}, ${from + count - 1}) g
        ), m as (
          insert into messages (id, thread_id, sender_agent_id, sender, content, summary, created_at)
          select ${idOf('src.ms', 'src.g')}, bt.id, a.id, a.username, pa.text || ' ' || pb.text,
                 case when src.rs < 0.2 then left(pb.text, 120) end, to_timestamp(src.ms / 1000.0)
          from src join bench_threads bt on bt.n = src.tn
          join bench_agents a on a.n = bt.members[1 + floor(src.rsender * cardinality(bt.members))::int]
          join bench_paragraphs pa on pa.n = src.p1 join bench_paragraphs pb on pb.n = src.p2
          returning id, thread_id, sender_agent_id, sender, summary, content, created_at
        )
        insert into deliveries (id, message_id, thread_id, recipient_id, step, failed_step, error, webhook, created_at,
                                notified_at, delivered_at, fetched_at, acknowledged_at, sender, summary, carries_files)
        select overlay(m.id::text placing substr('9abc', u.k::int, 1) from 20 for 1)::uuid, m.id, m.thread_id, a.id,
               s.step::delivery_step, case when s.step = 'failed' then 'accepted'::delivery_step end,
               case when s.step = 'failed' then 'Handler answered 500' end, a.n % 5 = 0, m.created_at,
               case when a.n % 5 = 0 and s.step <> 'failed' then m.created_at + interval '40 ms' end,
               case when s.step = 'fetched' then m.created_at + interval '1 minute' end,
               case when s.step = 'fetched' then m.created_at + interval '1 minute' end,
               case when s.step = 'fetched' then m.created_at + interval '2 minutes' end,
               -- What a post copies into a delivery while it is in the inbox (sql/036), its size
               -- about right: the body's first 200 characters stand in for its first line.
               case when s.step <> 'fetched' then m.sender end,
               case when s.step <> 'fetched' then coalesce(m.summary, left(m.content, 200)) end, false
        from m join bench_threads bt on bt.id = m.thread_id
        cross join lateral unnest(bt.members) with ordinality as u(agent, k)
        join bench_agents a on a.n = u.agent
        cross join lateral (select case when m.created_at > now() - interval '2 hours' then 'accepted'
                                        when (hashtext(m.id::text) & 1023) < 5 then 'failed' else 'fetched' end as step) s
        where a.id <> m.sender_agent_id`);
      // The attempt log is kept ATTEMPT_LOG_RETENTION_DAYS (30): only the newest month has one.
      await tx.unsafe(`
        insert into delivery_attempts (delivery_id, publish, attempt, attempted_at, duration_ms, status, url)
        select d.id, 1, 1, d.created_at + interval '20 ms', 38, case when d.step = 'failed' then 500 else 200 end, 'https://hooks.example/agent'
        from deliveries d where d.webhook and d.created_at > now() - interval '30 days'
          and d.id >= ${idOf(String(startMs), '0', '0')}`);
      const s = performance.now();
      await tx.unsafe(`
        insert into message_search (message_id, thread_id, document)
        select m.id, m.thread_id, message_document(t.title, m.summary, m.content)
        from messages m join threads t on t.id = m.thread_id
        where m.id >= ${idOf(String(startMs), '0', '0')} and m.id < ${idOf(String(endMs), '0', '0')}`);
      searchIndexSeconds = round((performance.now() - s) / 1000, 1);
    });
  });
  const fillSeconds = round((performance.now() - t) / 1000, 0);
  progress('vacuum analyze');
  await admin`vacuum analyze`;
  await autovacuumDone();
  const [counts] = await admin<{ threads: number; deliveries: number }[]>`
    select (select count(*) from threads)::int as threads, (select count(*) from deliveries)::int as deliveries`;
  return { messages: from + count, threads: counts!.threads, deliveries: counts!.deliveries, fillSeconds, searchIndexSeconds, indexSeconds };
}

// Autovacuum takes up a freshly filled table in its own time and slows everything while it works:
// the figures are taken once it has finished (up to 15 minutes).
async function autovacuumDone() {
  const deadline = performance.now() + 15 * 60_000;
  for (;;) {
    const [busy] = await admin<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where backend_type = 'autovacuum worker' and datname = current_database()`;
    if (busy!.n === 0 || performance.now() > deadline) return;
    progress('waiting for autovacuum to finish');
    await Bun.sleep(10_000);
  }
}

// ---- the figures ----
type Agent = { id: string; username: string };
type Actor = Agent & { kind: 'agent' };

async function timed(samples: number, call: (i: number) => Promise<unknown>) {
  for (let i = 0; i < 20; i++) await call(i);
  const ms: number[] = [];
  for (let i = 0; i < samples; i++) {
    const t = performance.now();
    await call(i);
    ms.push(performance.now() - t);
  }
  return latencySummary(ms);
}

async function sizes(name: string) {
  const [row] = await admin<{ mb: number }[]>`select round(pg_total_relation_size(${name}::regclass) / 1048576.0)::int as mb`;
  return row!.mb;
}

// The searching agent: the one in most threads is not typical, so the first in the list.
const searcherRow = async (): Promise<Actor> => {
  const [a] = await admin<Agent[]>`select id, username from bench_agents where n = 1`;
  return { kind: 'agent', ...a! };
};

// The rare word in 500 messages, posted as agents post: 50 in threads of the searching agent.
async function placeRareWord(searcher: Actor) {
  const threads = await admin<{ id: string; sender: string; username: string; mine: boolean }[]>`
    (select t.id, a.id as sender, a.username, true as mine from participants p join threads t on t.id = p.thread_id
      join participants o on o.thread_id = t.id and o.agent_id <> p.agent_id join agents a on a.id = o.agent_id
     where p.agent_id = ${searcher.id} order by t.id desc limit 50)
    union all
    (select t.id, a.id, a.username, false from threads t join participants o on o.thread_id = t.id join agents a on a.id = o.agent_id
     where not exists (select 1 from participants p where p.thread_id = t.id and p.agent_id = ${searcher.id})
       and o.agent_id = t.opened_by order by t.id desc limit 450)`;
  for (const [i, t] of threads.entries()) {
    await postMessage(sql, silentLogger, { kind: 'agent', id: t.sender, username: t.username }, t.id, {
      content: `About the ${RARE}: ${paragraph()} (${i})`,
    });
  }
  return threads.filter((t) => t.mine).length;
}

async function measure(searcher: Actor, ownThread: string, partner: Actor) {
  const figures: Record<string, { n: number; p50: number; p99: number }> = {};
  const run = async (label: string, call: (i: number) => Promise<unknown>) => {
    figures[label] = await timed(SAMPLES, call);
    progress(`  ${label}: p50 ${figures[label]!.p50} ms, p99 ${figures[label]!.p99} ms`);
  };
  // The bounds a deployment runs with, but for time: a slow plan is what this bench looks for.
  const searches = searchGate(onPrimary(sql), { timeoutMs: 600_000, concurrency: 1 });
  const searchFor = (q: string) => () => searchMessages(searches, searcher, messageSearch({ q }));
  const texts = Array.from({ length: 64 }, paragraph);
  const posted: string[] = [];
  const postedUnindexed: string[] = [];

  await run('round trip (select 1)', () => sql`select 1`);
  await run('post, fan-out 1', async (i) => posted.push((await postMessage(sql, silentLogger, searcher, ownThread, { content: texts[i % 64]! })).id));
  await admin`alter table messages disable trigger messages_search_index`;
  await run('post, fan-out 1, search trigger off', async (i) =>
    postedUnindexed.push((await postMessage(sql, silentLogger, searcher, ownThread, { content: texts[i % 64]! })).id));
  await admin`alter table messages enable trigger messages_search_index`;
  await run('inbox page (50)', () => inbox(sql, partner, 50));
  await run("list threads (all of an agent's)", () => listThreads(sql, searcher));
  await run('thread messages page (50)', () => listMessages(sql, partner, ownThread, 50));
  await run(`search, rare word (${RARE})`, searchFor(RARE));
  await run(`search, middling word (~0.4 %)`, searchFor(MIDDLING));
  await run(`search, common word (~35 %)`, searchFor(COMMON));
  await run('search, phrase of two common words', searchFor(`"${COMMON} ${VOCABULARY[10]}"`));
  await run('receipts of a message', (i) => messageReceipts(sql, null as unknown as InboxSignal, searcher, posted[i % posted.length]!, { waitFor: null, seconds: 0, stalledAfterMs: STALLED_AFTER_MS }));
  const plans = await receiptPlans(searcher, postedUnindexed);
  await run('dashboard overview', () => overview(onPrimary(sql), { warnAfterMs: [3_600_000, 86_400_000], disableAfterMs: 432_000_000, slowMs: 2_000, stalledAfterMs: STALLED_AFTER_MS }));
  await run('dashboard deliveries, first page', () => listDeliveries(sql, NO_FILTER, pageQuery({}), STALLED_AFTER_MS));
  await run('dashboard deliveries, one agent', () => listDeliveries(sql, deliveryFilter({ agent: searcher.username }), pageQuery({}), STALLED_AFTER_MS));
  await run('dashboard deliveries, failed', () => listDeliveries(sql, deliveryFilter({ state: 'failed' }), pageQuery({}), STALLED_AFTER_MS));
  await run(`dashboard deliveries, search (${RARE})`, () => listDeliveries(sql, deliveryFilter({ q: RARE }), pageQuery({}), STALLED_AFTER_MS));
  await run('dashboard threads, first page', () => listThreadsPage(sql, threadFilter({}), timeKeyedPageQuery({})));
  await run(`dashboard threads, search (${MIDDLING})`, () => listThreadsPage(sql, threadFilter({ q: MIDDLING }), timeKeyedPageQuery({})));
  return { figures, plans };
}

// The receipts read as PostgreSQL ran it (auto_explain, sent back as notices), for messages posted
// with the timed ones and not read since: the first executions of the prepared statement are
// planned for their values, later ones may use a cached generic plan; each message is read a second
// time to show it with every page in shared buffers.
async function receiptPlans(searcher: Actor, messageIds: string[]) {
  const notices: string[] = [];
  const probe = postgres(db.url, { max: 1, types: { bigint: postgres.BigInt }, onnotice: (n) => notices.push(n.message!) });
  await probe.unsafe(`load 'auto_explain'`);
  await probe.unsafe(`set auto_explain.log_min_duration = 0; set auto_explain.log_analyze = on;
    set auto_explain.log_buffers = on; set auto_explain.log_level = notice`);
  const plans: { messageId: string; first: string; again: string }[] = [];
  for (const messageId of messageIds.slice(0, 8)) {
    const read = async () => {
      notices.length = 0;
      await messageReceipts(probe as unknown as Sql, null as unknown as InboxSignal, searcher, messageId, { waitFor: null, seconds: 0, stalledAfterMs: STALLED_AFTER_MS });
      return notices.join('\n');
    };
    plans.push({ messageId, first: await read(), again: await read() });
  }
  await probe.end();
  progress(`  receipts plan, first read:\n${plans[0]!.first}\n  and from the sixth:\n${plans[6]!.first}`);
  return plans;
}

type SizeResult = {
  messages: number;
  fill: Fill;
  mb: Record<string, number>;
  searcherThreads: number;
  figures: Record<string, { n: number; p50: number; p99: number }>;
  plans: Awaited<ReturnType<typeof receiptPlans>>;
};

try {
  await prepare();
  const searcher = await searcherRow();
  const now = Date.now() - 60_000;
  let filled = 0;
  let ownThread = '';
  let partner: Actor | undefined;
  const results: SizeResult[] = [];
  for (const size of SIZES) {
    progress(`fill to ${size.toLocaleString('en')} messages`);
    // Each step is older history: the newest month is the first size's.
    const endMs = now - Math.round(filled * MS_PER_MESSAGE);
    const figuresOfFill = await fill(filled, size - filled, endMs);
    progress(`filled: ${JSON.stringify(figuresOfFill)}`);
    if (filled === 0) {
      const [p] = await admin<Agent[]>`select id, username from bench_agents where n = 2`;
      partner = { kind: 'agent', ...p! };
      ownThread = (await openThread(sql, searcher, { title: 'Bench pair', participantUsernames: [partner.username] })).id;
      const mine = await placeRareWord(searcher);
      progress(`"${RARE}" posted in 500 threads, ${mine} of them the searching agent's`);
      await admin`analyze`;
    }
    filled = size;
    const [own] = await admin<{ n: number }[]>`select count(*)::int as n from participants where agent_id = ${searcher.id}`;
    progress(`measuring at ${size.toLocaleString('en')} messages (the searching agent is in ${own!.n} threads)`);
    const mb = Object.fromEntries(await Promise.all(['messages', 'message_search', 'deliveries', 'delivery_attempts', 'threads'].map(async (t) => [t, await sizes(t)])));
    results.push({ messages: size, fill: figuresOfFill, mb, searcherThreads: own!.n, ...(await measure(searcher, ownThread, partner!)) });
  }

  progress('retention: one day of the attempt log, then one day of messages (the oldest), as the hourly sweep deletes them');
  const [oldest] = await admin<{ days: number }[]>`select extract(epoch from now() - min(created_at)) / 86400 as days from messages`;
  const [attemptsOldest] = await admin<{ days: number }[]>`select extract(epoch from now() - min(attempted_at)) / 86400 as days from delivery_attempts`;
  // Keeping one whole day less than the oldest row's age deletes at least its oldest day.
  const retain = (days: number) => Math.floor(days) - 1;
  let t = performance.now();
  const attempts = await pruneHistory(sql, { attemptLogDays: retain(attemptsOldest!.days), deadJobDays: 7, messageDays: null, eventHours: 168, auditDays: 365 });
  const attemptSeconds = (performance.now() - t) / 1000;
  t = performance.now();
  const messages = await pruneHistory(sql, { attemptLogDays: 30, deadJobDays: 7, messageDays: retain(oldest!.days), eventHours: 168, auditDays: 365 });
  const messageSeconds = (performance.now() - t) / 1000;
  const retention = {
    attempts: { rows: attempts.attempts, seconds: round(attemptSeconds, 1), perSecond: round(attempts.attempts / attemptSeconds, 0) },
    messages: { rows: messages.messages, seconds: round(messageSeconds, 1), perSecond: round(messages.messages / messageSeconds, 0) },
  };
  progress(`retention: ${JSON.stringify(retention)}`);

  const [first, last] = [results[0]!, results.at(-1)!];
  const ratio = (a: number, b: number) => round(a / b, 2);
  const rows = Object.keys(first.figures).map((label) => {
    const a = first.figures[label]!;
    const b = last.figures[label]!;
    return { label, first: a, last: b, p50Ratio: ratio(b.p50, a.p50), p99Ratio: ratio(b.p99, a.p99) };
  });
  const [version] = await admin<{ v: string }[]>`select current_setting('server_version') as v`;
  await Bun.write(`${root}bench/scale-results.json`, JSON.stringify({ postgres: version!.v, samples: SAMPLES, sizes: results, rows, retention }, null, 2) + '\n');
  const millions = (n: number) => `${n / 1_000_000} M`;
  console.log(`| | ${millions(first.messages)} p50 / p99 ms | ${millions(last.messages)} p50 / p99 ms | ratio p50 / p99 |`);
  console.log('|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.label} | ${r.first.p50} / ${r.first.p99} | ${r.last.p50} / ${r.last.p99} | ${r.p50Ratio} / ${r.p99Ratio} |`);
  progress('done; every figure is in bench/scale-results.json');
} finally {
  await sql.end();
  await admin.end();
  await db.drop();
}
