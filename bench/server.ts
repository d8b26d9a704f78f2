// The service as `ams serve` runs it, plus the bare-INSERT baseline route on the same connection
// pool: one process, so both sides of the comparison share the pool, the runtime and the CPU.
// Started by bench/run.ts with DATABASE_URL pointing at a fresh database.
import { loadConfig } from '../src/config';
import { openDatabase } from '../src/db/database';
import { cacheAgents } from '../src/db/agent-cache';
import { listenForInbox } from '../src/db/inbox-signal';
import { onAnnounceFailed } from '../src/domain/announce';
import { buildApp } from '../src/http/app';
import { createLogger } from '../src/log';
import { startWorker } from '../src/webhooks/worker';

const config = loadConfig();
const log = createLogger(config.LOG_LEVEL);
const db = await openDatabase(config, log);
await db.sql`
  create table if not exists bench_baseline (
    id uuid primary key default uuid_v7(),
    content text not null,
    created_at timestamptz not null default now()
  )`;
onAnnounceFailed((error) => log.warn('announce_failed', { error: error.message }));
const inboxSignal = listenForInbox(db.sql, log);
await inboxSignal.start();
const agentCache = cacheAgents(db.sql, log);
await agentCache.start();
const app = buildApp({ sql: db.sql, config, log, inboxSignal, agentCache })
  .post('/bench/insert', async ({ body, set }) => {
    const [row] = await db.sql`insert into bench_baseline (content) values (${(body as { content: string }).content}) returning id`;
    set.status = 201;
    return { success: true, data: { id: row!.id } };
  })
  .listen({ port: config.PORT, hostname: '127.0.0.1', maxRequestBodySize: config.BODY_LIMIT_BYTES });
const worker = await startWorker({ sql: db.sql, databaseUrl: db.url, config, log });
console.log(JSON.stringify({ ready: true, port: app.server!.port }));

process.on('SIGTERM', async () => {
  await inboxSignal.stop();
  await agentCache.stop();
  await app.stop();
  await worker.stop();
  await db.close();
  process.exit(0);
});
