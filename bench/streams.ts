// The far end of the many-streams scenario, in a process of its own: it holds one agent event
// stream (`GET /api/events`) open per key in the file it is given, each on its own TCP connection,
// and prints a JSON line for every message.created it reads, with the time it arrived (epoch ms,
// so that the load process can compare it with its own clock). Plain sockets, as bench/waiters.ts
// uses: ten thousand fetch streams would measure the client.
//
// stdout: {"opened":n} once every request is written, then {"at","messageId"} per event, until
// the process is killed. Env: STREAMS_TARGET (host:port), STREAMS_KEYS (a file, one key per line).
import { readFileSync } from 'node:fs';
import { batchedLines } from './json-lines';

const [host, port] = process.env.STREAMS_TARGET!.split(':') as [string, string];
const keys = readFileSync(process.env.STREAMS_KEYS!, 'utf8').split('\n').filter(Boolean);
const now = () => performance.timeOrigin + performance.now();
const { out, flush } = batchedLines();

// One stream's bytes: the response head, then HTTP/1.1 chunks, whose payloads are the event text.
function streamReader() {
  let raw = Buffer.alloc(0);
  let headDone = false;
  let text = '';
  return (chunk: Buffer, at: number) => {
    raw = Buffer.concat([raw, chunk]);
    if (!headDone) {
      const end = raw.indexOf('\r\n\r\n');
      if (end < 0) return;
      headDone = true;
      raw = raw.subarray(end + 4);
    }
    for (;;) {
      const line = raw.indexOf('\r\n');
      if (line < 0) break;
      const size = parseInt(raw.subarray(0, line).toString(), 16);
      if (raw.length < line + 2 + size + 2) break;
      text += raw.subarray(line + 2, line + 2 + size).toString();
      raw = raw.subarray(line + 2 + size + 2);
    }
    for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n')) {
      const block = text.slice(0, end);
      text = text.slice(end + 2);
      if (!block.includes('event: message.created')) continue;
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (data) out({ at, messageId: JSON.parse(data).messageId });
    }
  };
}

let opened = 0;
// Opened a few hundred at a time, as agents coming online would.
const BATCH = 250;
for (let i = 0; i < keys.length; i += BATCH) {
  await Promise.all(
    keys.slice(i, i + BATCH).map(async (key) => {
      const read = streamReader();
      await Bun.connect({
        hostname: host,
        port: Number(port),
        socket: {
          open(socket) {
            socket.write(`GET /api/events HTTP/1.1\r\nHost: ${host}:${port}\r\nAuthorization: Bearer ${key}\r\nAccept: text/event-stream\r\n\r\n`);
          },
          data(_socket, chunk) {
            read(chunk, now());
          },
        },
      });
      opened++;
    }),
  );
}
out({ opened });
flush();
