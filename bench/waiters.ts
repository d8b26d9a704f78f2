// The far end of the many-waiters scenario, in a process of its own: it holds one bounded wait
// (`GET /api/deliveries?wait=…`) open per key in the file it is given, each on its own TCP
// connection, and prints a JSON line for every answer with the time it arrived (epoch ms, so that
// the load process can compare it with its own clock). Plain sockets rather than fetch: fetch
// caps the requests it keeps in flight, and ten thousand HTTP clients would measure themselves.
//
// stdin: nothing; stdout: {"opened":n} once every request is written, then {"at","status","messageIds"}
// per answer. Env: WAITERS_TARGET (host:port), WAITERS_KEYS (a file, one key per line), WAITERS_WAIT.
import { readFileSync } from 'node:fs';
import { batchedLines } from './json-lines';

const [host, port] = process.env.WAITERS_TARGET!.split(':') as [string, string];
const keys = readFileSync(process.env.WAITERS_KEYS!, 'utf8').split('\n').filter(Boolean);
const wait = process.env.WAITERS_WAIT ?? '60';
const now = () => performance.timeOrigin + performance.now();
const { out, flush } = batchedLines();

// One response, read until its Content-Length is in (the service always sends one for JSON).
function answered(text: string): { status: number; body: string } | null {
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const head = text.slice(0, end);
  const length = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? NaN);
  const body = text.slice(end + 4);
  if (!(Buffer.byteLength(body) >= length)) return null;
  return { status: Number(head.slice(9, 12)), body };
}

let opened = 0;
// Opened a few hundred at a time, as agents coming online would, so that the listen backlog is
// never the thing measured.
const BATCH = 250;
for (let i = 0; i < keys.length; i += BATCH) {
  await Promise.all(
    keys.slice(i, i + BATCH).map(async (key) => {
      let text = '';
      let done = false;
      await Bun.connect({
        hostname: host,
        port: Number(port),
        socket: {
          open(socket) {
            socket.write(
              `GET /api/deliveries?wait=${wait} HTTP/1.1\r\nHost: ${host}:${port}\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`,
            );
          },
          data(socket, chunk) {
            if (done) return;
            text += chunk.toString();
            const res = answered(text);
            if (!res) return;
            done = true;
            const at = now();
            let messageIds: string[] = [];
            try {
              messageIds = (JSON.parse(res.body).data ?? []).map((e: { messageId: string }) => e.messageId);
            } catch {}
            out({ at, status: res.status, messageIds });
            socket.end();
          },
          error() {
            if (!done) out({ at: now(), status: 0, messageIds: [] });
            done = true;
          },
        },
      });
      opened++;
    }),
  );
}
out({ opened });
flush();
