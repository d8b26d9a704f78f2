// The service as `ams serve` runs it, plus the bare baseline routes (an INSERT, a post's rows, a
// 50-row SELECT) on the same connection pool: one process, so both sides of a comparison share
// the pool, the runtime and the CPU.
// Started by bench/run.ts with DATABASE_URL pointing at a fresh database.
import { readFileSync } from 'node:fs';
import { loadConfig } from '../src/config';
import { createLogger } from '../src/log';
import { createService } from '../src/service';

const config = loadConfig();
const log = createLogger(config.LOG_LEVEL);
const service = await createService(config, { log, http: true, worker: true });
await service.sql`
  create table if not exists bench_baseline (
    id uuid primary key default uuid_v7(),
    content text not null,
    created_at timestamptz not null default now()
  )`;
// The first 50 rows, which the bare SELECT reads whatever the bare INSERT adds later.
await service.sql`
  insert into bench_baseline (content)
  select 'baseline row ' || g from generate_series(1, 50 - (select count(*) from bench_baseline)::int) g`;
service.app.post('/bench/insert', async ({ body, set }) => {
  const [row] = await service.sql`insert into bench_baseline (content) values (${(body as { content: string }).content}) returning id`;
  set.status = 201;
  return { success: true, data: { id: row!.id } };
});
// A post's counterpart: the same rows (a message and a delivery per recipient, with their indexes,
// foreign keys and triggers) written bare, one statement per request, with no authentication,
// validation or membership check.
service.app.post('/bench/insert-message', async ({ body, set }) => {
  const { threadId, senderId, recipientIds, content } = body as { threadId: string; senderId: string; recipientIds: string[]; content: string };
  const [row] = await service.sql`
    with m as (
      insert into messages (thread_id, sender_agent_id, sender, content)
      values (${threadId}, ${senderId}, 'sender', ${content}) returning id, thread_id
    ), d as (
      insert into deliveries (message_id, thread_id, recipient_id, webhook, sender, summary, carries_files)
      select m.id, m.thread_id, r, false, 'sender', ${content}, false from m, unnest(${recipientIds}::uuid[]) r
    )
    select id from m`;
  set.status = 201;
  return { success: true, data: { id: row!.id } };
});
// An inbox page's counterpart: 50 rows by primary key, no authentication, no visibility test.
service.app.get('/bench/select', async () => {
  const rows = await service.sql`select id, content, created_at from bench_baseline order by id limit 50`;
  return { success: true, data: rows };
});
// The inbox page's own rows read bare (a context row): the eight columns of the same fifty
// deliveries the page reads, off the same index, with neither authentication nor the visibility
// test nor the thread's title. What the entries cost to read and answer at the least.
service.app.get('/bench/inbox-rows', async ({ query }) => {
  const recipient = service.sql`(select ${(query as { recipient: string }).recipient}::uuid)`;
  const rows = await service.sql`
    select d.id, d.message_id, d.thread_id, d.sender, d.summary, d.created_at, d.fetched_at is not null as read, d.carries_files
    from deliveries d where d.recipient_id between ${recipient} and ${recipient} and d.acknowledged_at is null
    order by d.recipient_id, d.id limit 50`;
  return { success: true, data: rows };
});
// Lets a scenario that measures memory start from this process's live data rather than from the
// garbage of the scenario before it.
service.app.post('/bench/gc', () => {
  Bun.gc(true);
  return { success: true, data: null };
});
// BENCH_MEMORY_LOG=<file>: what holds the memory, twice a second, one JSON line each (resident
// memory split into anonymous and file-backed, the JavaScript heap and what it reports outside
// itself), every stall of the event loop over 20 ms, and on SIGUSR2 a heap snapshot beside the file
// (`<file>.heapsnapshot`, V8's format): for a peak, or a latency, the heap alone does not explain.
// Once a second, for what lies outside the heap: every anonymous mapping holding over 1 MB (a line
// with `mappings`; the native allocator's arenas are the 1 GiB read-write ones, and the heap's
// blocks are in them too), and the allocator's own account by block size, written to stderr
// (bench/server.log) after a line `mimalloc at <epoch ms>`.
if (process.env.BENCH_MEMORY_LOG) {
  const path = process.env.BENCH_MEMORY_LOG;
  const file = Bun.file(path).writer();
  const line = (fields: Record<string, number>) => {
    file.write(`${JSON.stringify({ at: Date.now(), ...fields })}\n`);
    file.flush();
  };
  const mb = (bytes: number) => Math.round(bytes / 1_048_576);
  const statusMb = (status: string, field: string) => Math.round(Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN) / 1024);
  setInterval(() => {
    const status = readFileSync('/proc/self/status', 'utf8');
    const { rss, heapUsed, heapTotal, external } = process.memoryUsage();
    line({ rss: mb(rss), anon: statusMb(status, 'RssAnon'), file: statusMb(status, 'RssFile'), heapUsed: mb(heapUsed), heapTotal: mb(heapTotal), external: mb(external) });
  }, 500).unref();
  let tick = performance.now();
  setInterval(() => {
    const now = performance.now();
    if (now - tick > 30) line({ stallMs: Math.round(now - tick - 10) });
    tick = now;
  }, 10).unref();
  setInterval(() => {
    const mappings: { size: number; perm: string; rss: number; name: string }[] = [];
    let current: { size: number; perm: string; name: string } | null = null;
    for (const row of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
      const range = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(row);
      if (range) current = { size: Math.round((parseInt(range[2]!, 16) - parseInt(range[1]!, 16)) / 1_048_576), perm: range[3]!, name: range[4]! };
      const rss = /^Rss:\s+(\d+)/.exec(row);
      const anonymous = current !== null && (current.name === '' || current.name.startsWith('['));
      if (rss && anonymous && Number(rss[1]) > 1024) mappings.push({ ...current!, rss: Math.round(Number(rss[1]) / 1024) });
    }
    file.write(`${JSON.stringify({ at: Date.now(), mappings })}\n`);
    file.flush();
    process.stderr.write(`mimalloc at ${Date.now()}\n`);
    Bun.unsafe.mimallocDump();
  }, 1000).unref();
  process.on('SIGUSR2', () => void Bun.write(`${path}.heapsnapshot`, Bun.generateHeapSnapshot('v8')));
}
console.log(JSON.stringify({ ready: true, port: service.listen() }));

process.on('SIGTERM', async () => {
  await service.stop();
  process.exit(0);
});
