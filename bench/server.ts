// The service as `ams serve` runs it, plus the bare-INSERT baseline route on the same connection
// pool: one process, so both sides of the comparison share the pool, the runtime and the CPU.
// Started by bench/run.ts with DATABASE_URL pointing at a fresh database.
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
service.app.post('/bench/insert', async ({ body, set }) => {
  const [row] = await service.sql`insert into bench_baseline (content) values (${(body as { content: string }).content}) returning id`;
  set.status = 201;
  return { success: true, data: { id: row!.id } };
});
// Lets a scenario that measures memory start from this process's live data rather than from the
// garbage of the scenario before it.
service.app.post('/bench/gc', () => {
  Bun.gc(true);
  return { success: true, data: null };
});
console.log(JSON.stringify({ ready: true, port: service.listen() }));

process.on('SIGTERM', async () => {
  await service.stop();
  process.exit(0);
});
