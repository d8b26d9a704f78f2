// One side of the files bench (bench/files.ts), as a process of its own so that its memory is
// measured alone. FILES_SIDE=service: the service as `ams serve` runs it (no worker). FILES_SIDE=
// baseline: a bare Bun.serve that streams each body into one PostgreSQL table in chunks of the same
// size and streams them back, with no authentication, hash, checks or quota. Prints its port.
import postgres from 'postgres';
import { loadConfig } from '../src/config';
import { silentLogger } from '../src/log';
import { createService } from '../src/service';
import { CHUNK_BYTES } from '../src/domain/files/file-store';

if (process.env.FILES_SIDE === 'service') {
  const service = await createService(loadConfig(), { log: silentLogger, http: true, worker: false });
  console.log(JSON.stringify({ port: service.listen() }));
  process.on('SIGTERM', async () => {
    await service.stop();
    process.exit(0);
  });
} else {
  const sql = postgres(process.env.DATABASE_URL!, { max: loadConfig().DB_POOL_SIZE, onnotice: () => {} });
  await sql`create table if not exists bench_blobs (id uuid not null, n integer not null, data bytea not null, primary key (id, n))`;
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    async fetch(request) {
      const path = new URL(request.url).pathname;
      if (request.method === 'POST') {
        const id = crypto.randomUUID();
        const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
        let filled = 0;
        let n = 0;
        const flush = async () => {
          await sql`insert into bench_blobs (id, n, data) values (${id}, ${n++}, ${chunk.subarray(0, filled)})`;
          filled = 0;
        };
        for await (const piece of request.body as unknown as AsyncIterable<Uint8Array>) {
          for (let at = 0; at < piece.byteLength; ) {
            const taken = Math.min(CHUNK_BYTES - filled, piece.byteLength - at);
            chunk.set(piece.subarray(at, at + taken), filled);
            filled += taken;
            at += taken;
            if (filled === CHUNK_BYTES) await flush();
          }
        }
        if (filled > 0) await flush();
        return Response.json({ id }, { status: 201 });
      }
      const id = path.split('/').pop()!;
      let n = 0;
      return new Response(
        new ReadableStream<Uint8Array>({
          async pull(controller) {
            const [row] = await sql<{ data: Buffer }[]>`select data from bench_blobs where id = ${id} and n = ${n++}`;
            if (row) controller.enqueue(row.data);
            else controller.close();
          },
        }),
        { headers: { 'content-type': 'application/octet-stream' } },
      );
    },
  });
  console.log(JSON.stringify({ port: server.port }));
  process.on('SIGTERM', async () => {
    server.stop(true);
    await sql.end();
    process.exit(0);
  });
}
