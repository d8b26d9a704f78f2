// `bun bench/files.ts` (or `BENCH_ONLY=files bun run bench`): files in and out of PostgreSQL, on a
// fresh database. For 1, 10 and 100 transfers at once (FILES_CONCURRENCY) of FILES_MB MiB each
// (25 by default, the largest FILE_MAX_BYTES allows), uploads then downloads of the same bytes,
// through the service (POST /api/files, GET /api/files/{id}/content, with its authentication,
// hashing, checks, quota and chunked storage) and through the bare baseline of
// bench/files-server.ts (the same chunks into and out of one table, nothing else), each side a
// process of its own. Each figure: the wall time of the whole batch, the throughput it makes
// (MiB/s, all transfers together), and the side's peak resident memory during the batch (sampled
// every 20 ms from /proc) against its resident memory before it.
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { createAgent } from '../src/domain/agents/agents';
import { BY_CLI } from '../src/domain/people/audit';
import { connect } from '../src/db/connect';
import { freshDatabases } from './fresh-database';
import { round } from './stats';

const MIB = 1024 * 1024;
const size = Number(process.env.FILES_MB ?? 25) * MIB;
const batches = (process.env.FILES_CONCURRENCY ?? '1,10,100').split(',').map(Number);
const root = new URL('..', import.meta.url).pathname;
const progress = (line: string) => process.stderr.write(`${line}\n`);

const residentKb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

async function start(side: 'service' | 'baseline', url: string) {
  const child = Bun.spawn(['bun', 'bench/files-server.ts'], {
    cwd: root,
    env: { ...process.env, FILES_SIDE: side, DATABASE_URL: url, PORT: '0', HOST: '127.0.0.1', FILE_QUOTA_BYTES: '0', FILE_MAX_BYTES: String(size) },
    stdout: 'pipe',
    stderr: 'inherit',
  });
  const reader = child.stdout.getReader();
  let text = '';
  while (!text.includes('\n')) text += new TextDecoder().decode((await reader.read()).value);
  return { child, base: `http://127.0.0.1:${JSON.parse(text.split('\n')[0]!).port}` };
}

// Runs `work` while sampling the process's memory: the seconds it took and the peak RSS in MiB.
async function measured<T>(pid: number, work: () => Promise<T>) {
  const before = residentKb(pid);
  let peak = before;
  const sampler = setInterval(() => (peak = Math.max(peak, residentKb(pid))), 20);
  const started = performance.now();
  const result = await work();
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  peak = Math.max(peak, residentKb(pid));
  return { result, seconds, beforeMiB: round(before / 1024, 0), peakMiB: round(peak / 1024, 0) };
}

const body = randomBytes(size);
const db = await freshDatabases();
const rows: Record<string, unknown>[] = [];
try {
  const sql = connect(db.url, 2);
  const { apiKey } = await createAgent(sql, BY_CLI, { username: 'bench-uploader' }, { allowLocal: true });
  await sql.end();
  const sides = {
    service: await start('service', db.url),
    baseline: await start('baseline', db.baselineUrl),
  };
  const auth = { authorization: `Bearer ${apiKey}` };
  const routes = {
    service: { upload: (base: string) => `${base}/api/files?name=bench.bin`, download: (base: string, id: string) => `${base}/api/files/${id}/content`, id: (json: any) => json.data.id },
    baseline: { upload: (base: string) => `${base}/blobs`, download: (base: string, id: string) => `${base}/blobs/${id}`, id: (json: any) => json.id },
  };
  for (const concurrency of batches) {
    for (const side of ['baseline', 'service'] as const) {
      const { child, base } = sides[side];
      const route = routes[side];
      Bun.gc(true);
      const up = await measured(child.pid, () =>
        Promise.all(
          Array.from({ length: concurrency }, async () => {
            const response = await fetch(route.upload(base), { method: 'POST', headers: { ...auth, 'content-type': 'application/octet-stream' }, body });
            if (response.status !== 201) throw new Error(`${side} upload answered ${response.status}: ${await response.text()}`);
            return route.id(await response.json());
          }),
        ),
      );
      const down = await measured(child.pid, () =>
        Promise.all(
          up.result.map(async (id: string) => {
            const response = await fetch(route.download(base, id), { headers: auth });
            let bytes = 0;
            for await (const part of response.body as unknown as AsyncIterable<Uint8Array>) bytes += part.byteLength;
            if (bytes !== size) throw new Error(`${side} download of ${id} gave ${bytes} bytes`);
          }),
        ),
      );
      for (const [direction, m] of [['upload', up], ['download', down]] as const) {
        const row = { side, direction, concurrency, seconds: round(m.seconds, 2), mibPerSecond: round((concurrency * size) / MIB / m.seconds, 0), rssBeforeMiB: m.beforeMiB, rssPeakMiB: m.peakMiB };
        rows.push(row);
        progress(JSON.stringify(row));
      }
      // The next batch starts from empty tables.
      const clean = postgres(side === 'service' ? db.url : db.baselineUrl, { max: 1, onnotice: () => {} });
      if (side === 'service') await clean`delete from files`;
      else await clean`truncate bench_blobs`;
      await clean`vacuum`.catch(() => undefined);
      await clean.end();
    }
  }
  for (const { child } of Object.values(sides)) {
    child.kill('SIGTERM');
    await child.exited;
  }
} finally {
  await db.drop();
}
console.log(JSON.stringify({ fileBytes: size, rows }));
