// `bun bench/growth.ts`: what the history's size costs the work that grows with it, to decide when
// messages, deliveries and the attempt log need partitioning by time (docs/internals/scaling.md).
// A fresh database is filled with GROWTH_MESSAGES (10 000 000) messages over ten months (a month
// per million, as bench/scale.ts), each with one or two deliveries and, for a fifth of the newest
// month's deliveries, an attempt-log row; set-based SQL with the row triggers off (so without
// search entries: bench/scale.ts measures those). Reports how long 100 000 messages take to write
// with every index kept up, into the empty database and into the full one (does writing slow as
// the tables grow?), then at the full size: the tables' sizes, a VACUUM (FREEZE) of each (what an
// anti-wraparound vacuum costs, which grows with the table), and one day of messages deleted the
// way the hourly sweep deletes them. Writes bench/growth.json.
import postgres from 'postgres';
import { connect } from '../src/db/connect';
import { pruneHistory } from '../src/domain/messages/retention';
import { freshDatabases } from './fresh-database';
import { round } from './stats';

const MESSAGES = Number(process.env.GROWTH_MESSAGES ?? 10_000_000);
const CHUNK = 1_000_000;
const SAMPLE = 100_000;
const AGENTS = 2_000;
const DAY_MS = 86_400_000;
const MS_PER_MESSAGE = (30 * DAY_MS) / 1_000_000;
const root = new URL('..', import.meta.url).pathname;
const started = performance.now();
const progress = (line: string) => process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(0)} s] ${line}\n`);

const db = await freshDatabases();
const admin = postgres(db.url, { max: 1, onnotice: () => {} });
const sql = connect(db.url, 2);
const seconds = async (step: () => Promise<unknown>) => {
  const t = performance.now();
  await step();
  return round((performance.now() - t) / 1000, 1);
};
// A UUIDv7 of the millisecond `ms`, unique by `n` (as bench/scale.ts makes them).
const idOf = (ms: string, n: string, variant = '8') =>
  `(lpad(to_hex(${ms}), 12, '0') || '7' || lpad(to_hex(${n} & 4095), 3, '0') || '${variant}' || lpad(to_hex(${n}), 15, '0'))::uuid`;

try {
  await admin`
    with claimed as (insert into usernames (username, owner) select 'agent-' || n, 'agent' from generate_series(1, ${AGENTS}::int) n returning username)
    insert into agents (username, key_hash) select username, sha256(('bench ' || username)::bytea) from claimed`;
  await admin`create table bench_agents as select row_number() over (order by username)::int as n, id, username from agents`;
  await admin`alter table bench_agents add primary key (n)`;
  const now = Date.now() - 60_000;
  // Messages `from` to `from + count - 1`, the oldest first, so that ids and times grow as in
  // service; `count` a multiple of 20.
  const fill = (from: number, count: number) => {
    const startMs = now - Math.round((MESSAGES - from) * MS_PER_MESSAGE);
    const endMs = startMs + Math.round(count * MS_PER_MESSAGE);
    // Thread t (from 0) of these, opened at the time of its first message.
    const threadOf = (t: string) => idOf(`(${startMs}::bigint + (${t})::bigint * ${Math.round((endMs - startMs) / (count / 20))})`, `(${from / 20} + ${t})`, 'a');
    return seconds(() =>
      admin.begin(async (tx) => {
        await tx`set local session_replication_role = replica`;
        // Threads of 20 messages each.
        await tx.unsafe(`
          insert into threads (id, title, opened_by, created_at, last_activity_at)
          select ${threadOf('t')}, 'thread ' || (${from / 20} + t),
                 (select id from bench_agents where n = 1 + (t % ${AGENTS})), to_timestamp(${startMs / 1000}), to_timestamp(${endMs / 1000})
          from generate_series(0, ${count / 20 - 1}) t`);
        await tx.unsafe(`
          with src as (
            select g, ${startMs}::bigint + ((g - ${from})::float8 * ${endMs - startMs} / ${count})::bigint as ms,
                   1 + floor(random() * ${AGENTS})::int as sender, random() as r
            from generate_series(${from}, ${from + count - 1}) g
          ), m as (
            insert into messages (id, thread_id, sender_agent_id, sender, content, summary, created_at)
            select ${idOf('src.ms', 'src.g')}, ${threadOf('(src.g - ' + from + ') / 20')}, a.id, a.username,
                   repeat('a message of about the size agents send ', 1 + (src.g % 6)), case when src.r < 0.2 then 'a summary' end, to_timestamp(src.ms / 1000.0)
            from src join bench_agents a on a.n = src.sender
            returning id, thread_id, created_at
          )
          insert into deliveries (id, message_id, thread_id, recipient_id, step, webhook, created_at, notified_at, fetched_at, acknowledged_at)
          select overlay(m.id::text placing k::text from 20 for 1)::uuid, m.id, m.thread_id, a.id, 'fetched', a.n % 5 = 0, m.created_at,
                 case when a.n % 5 = 0 then m.created_at + interval '40 ms' end, m.created_at + interval '1 minute', m.created_at + interval '2 minutes'
          from m cross join lateral generate_series(1, 1 + (hashtext(m.id::text) & 1)) k
          join bench_agents a on a.n = 1 + ((hashtext(m.id::text) & 2047) + k * 7) % ${AGENTS}`);
        // The attempt log is kept 30 days: only the newest month has one.
        if (endMs > now - 30 * DAY_MS) {
          await tx.unsafe(`
            insert into delivery_attempts (delivery_id, publish, attempt, attempted_at, duration_ms, status, url)
            select d.id, 1, 1, d.created_at + interval '20 ms', 38, 200, 'https://hooks.example/agent'
            from deliveries d where d.webhook and d.id >= ${idOf(`${Math.max(startMs, now - 30 * DAY_MS)}::bigint`, '0', '0')}`);
        }
      }),
    );
  };
  // The first and the last SAMPLE messages are written with every index kept up, into an empty
  // database and into a full one; the rest in bulk, the secondary indexes built after it, as a
  // restore would.
  const first = await fill(0, SAMPLE);
  progress(`${SAMPLE.toLocaleString('en')} messages into an empty database: ${first} s`);
  const indexes = await admin<{ name: string; definition: string }[]>`
    select i.indexrelid::regclass::text as name, pg_get_indexdef(i.indexrelid) as definition
    from pg_index i join pg_class t on t.oid = i.indrelid
    where t.relname = any(${['messages', 'deliveries', 'delivery_attempts', 'threads']}) and t.relnamespace = 'public'::regnamespace
      and not exists (select 1 from pg_constraint c where c.conindid = i.indexrelid)`;
  for (const index of indexes) await admin.unsafe(`drop index ${index.name}`);
  for (let from = SAMPLE; from < MESSAGES - SAMPLE; from += CHUNK) {
    const took = await fill(from, Math.min(CHUNK, MESSAGES - SAMPLE - from));
    progress(`${Math.min(from + CHUNK, MESSAGES - SAMPLE).toLocaleString('en')} messages (${took} s, no secondary indexes)`);
  }
  await admin.unsafe(`set maintenance_work_mem = '512MB'`);
  const indexSeconds = await seconds(async () => {
    for (const index of indexes) await admin.unsafe(index.definition);
  });
  progress(`${indexes.length} secondary indexes built in ${indexSeconds} s`);
  await admin`analyze`;
  const last = await fill(MESSAGES - SAMPLE, SAMPLE);
  progress(`the last ${SAMPLE.toLocaleString('en')} messages, at ${MESSAGES.toLocaleString('en')}: ${last} s`);
  const fills = { sample: SAMPLE, emptySeconds: first, fullSeconds: last, indexSeconds };
  const [counts] = await admin<{ deliveries: number; attempts: number }[]>`
    select (select count(*) from deliveries)::int as deliveries, (select count(*) from delivery_attempts)::int as attempts`;
  const tables = ['messages', 'deliveries', 'delivery_attempts', 'threads'];
  const mb: Record<string, { table: number; indexes: number }> = {};
  for (const table of tables) {
    const [row] = await admin<{ table: number; indexes: number }[]>`
      select round(pg_table_size(${table}::regclass) / 1048576.0)::int as table, round(pg_indexes_size(${table}::regclass) / 1048576.0)::int as indexes`;
    mb[table] = row!;
  }
  progress(`sizes (MB): ${JSON.stringify(mb)}`);
  const freeze: Record<string, number> = {};
  for (const table of tables) {
    freeze[table] = await seconds(() => admin.unsafe(`vacuum (freeze, analyze) ${table}`));
    progress(`vacuum (freeze) ${table}: ${freeze[table]} s`);
  }
  const [oldest] = await admin<{ days: number }[]>`select extract(epoch from now() - min(created_at)) / 86400 as days from messages`;
  let deleted = 0;
  const retentionSeconds = await seconds(async () => {
    deleted = (await pruneHistory(sql, { attemptLogDays: 30, deadJobDays: 7, messageDays: Math.floor(oldest!.days) - 1, eventHours: 168, auditDays: 365 })).messages;
  });
  progress(`retention: ${deleted} messages (the oldest day) in ${retentionSeconds} s`);
  const [version] = await admin<{ v: string }[]>`select current_setting('server_version') as v`;
  const result = {
    postgres: version!.v,
    messages: MESSAGES,
    deliveries: counts!.deliveries,
    attempts: counts!.attempts,
    fills,
    mb,
    freezeSeconds: freeze,
    retention: { messages: deleted, seconds: retentionSeconds, perSecond: Math.round(deleted / retentionSeconds) },
  };
  await Bun.write(`${root}bench/growth.json`, JSON.stringify(result, null, 2) + '\n');
  console.log(JSON.stringify(result, null, 2));
} finally {
  await sql.end();
  await admin.end();
  await db.drop();
}
