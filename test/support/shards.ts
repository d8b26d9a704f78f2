// `bun run test`: the files under test/ split into shards that run side by side, each a `bun test`
// process with a PostgreSQL of its own (TEST_PG_PORT, TEST_PG_DIR), because most of a file's time
// is spent waiting on PostgreSQL, a browser or a child process rather than on a core. Files are
// dealt longest first to the shard with the least time so far, from the times in durations.json
// (a file not listed counts as DEFAULT_SECONDS); a stale list only unbalances the shards. Each
// shard's output is printed whole when it ends, so that it reads as one `bun test` run.
// TEST_SHARDS=1 runs one process, as `bun test` alone would.
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import durations from './durations.json';

const DEFAULT_SECONDS = 5;
const FIRST_PORT = Number(process.env.TEST_PG_PORT ?? 54339);
const shardCount = Number(process.env.TEST_SHARDS ?? Math.min(availableParallelism(), 4));
const extraArgs = process.argv.slice(2);

const files = readdirSync('test')
  .filter((name) => name.endsWith('.test.ts'))
  .map((name) => join('test', name));
const seconds = (file: string) => (durations as Record<string, number>)[file] ?? DEFAULT_SECONDS;

const shards = Array.from({ length: Math.max(1, Math.min(shardCount, files.length)) }, () => ({ files: [] as string[], seconds: 0 }));
for (const file of [...files].sort((a, b) => seconds(b) - seconds(a) || a.localeCompare(b))) {
  const lightest = shards.reduce((least, shard) => (shard.seconds < least.seconds ? shard : least));
  lightest.files.push(file);
  lightest.seconds += seconds(file);
}

// Both of a shard's streams go to one file, so that its lines keep the order bun wrote them in.
const logs = mkdtempSync(join(tmpdir(), 'ams-test-shards-'));
const runs = shards.map(async (shard, index) => {
  const log = join(logs, `shard-${index + 1}.log`);
  const fd = openSync(log, 'w');
  const proc = Bun.spawn(['bun', 'test', ...extraArgs, ...shard.files.sort().map((file) => `./${file}`)], {
    env: { ...process.env, TEST_PG_PORT: String(FIRST_PORT + index), TEST_PG_DIR: index === 0 ? '.test-data' : `.test-data-${index + 1}` },
    stdout: fd,
    stderr: fd,
  });
  const code = await proc.exited;
  closeSync(fd);
  process.stdout.write(`\n==== shard ${index + 1} of ${shards.length}: ${shard.files.length} files, exit ${code} ====\n${readFileSync(log, 'utf8')}`);
  return code;
});
const codes = await Promise.all(runs);
rmSync(logs, { recursive: true, force: true });
process.exit(codes.find((code) => code !== 0) ?? 0);
