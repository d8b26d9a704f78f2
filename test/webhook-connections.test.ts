import { afterAll, expect, test } from 'bun:test';
import { postPinned } from '../src/webhooks/send';

// Which connection each doorbell arrived on: the handler sees the worker's source port.
const ports: { path: string; port: number }[] = [];
const server = Bun.serve({
  hostname: '127.0.0.1',
  port: 0,
  fetch(req, srv) {
    const path = new URL(req.url).pathname;
    ports.push({ path, port: srv.requestIP(req)!.port });
    if (path.startsWith('/long')) return new Response('x'.repeat(4096));
    return new Response('ok');
  },
});
// A handler that answers the first request on each connection and closes the connection, without
// a word, when a second one arrives on it: as a server does whose idle time-out struck just as a
// doorbell went out on the connection.
const requestsPerConnection = new Map<number, number>();
const closing = Bun.listen<{ id: number }>({
  hostname: '127.0.0.1',
  port: 0,
  socket: {
    open(socket) {
      socket.data = { id: requestsPerConnection.size };
      requestsPerConnection.set(socket.data.id, 0);
    },
    data(socket) {
      const seen = requestsPerConnection.get(socket.data.id)! + 1;
      requestsPerConnection.set(socket.data.id, seen);
      if (seen > 1) return void socket.end();
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok');
    },
  },
});
afterAll(() => {
  server.stop(true);
  closing.stop(true);
});

const pinned = { address: '127.0.0.1', family: 4 };
const send = (host: string, path: string) => {
  const url = new URL(`http://${host}:${server.port}${path}`);
  return postPinned(url, pinned, { url: url.href, body: '{}', headers: { 'content-type': 'application/json' } }, { timeoutMs: 2_000 });
};
const portsOf = (prefix: string) => ports.filter((p) => p.path.startsWith(prefix)).map((p) => p.port);

test('doorbells to one endpoint share a kept connection; another host name at the same address gets its own', async () => {
  for (let i = 0; i < 3; i++) expect(await send('127.0.0.1', '/same')).toMatchObject({ status: 200, error: null, responseBody: 'ok' });
  expect(new Set(portsOf('/same')).size).toBe(1);
  expect(await send('localhost', '/other-name')).toMatchObject({ status: 200, error: null });
  expect(portsOf('/other-name')[0]).not.toBe(portsOf('/same')[0]);
});

test('an answer cut short (more than the KiB kept) closes its connection: the next doorbell opens a new one', async () => {
  const first = await send('127.0.0.1', '/long-1');
  expect(first).toMatchObject({ status: 200, error: null });
  expect(first.responseBody).toBe('x'.repeat(1024));
  expect(await send('127.0.0.1', '/long-2')).toMatchObject({ status: 200, error: null });
  const [a, b] = portsOf('/long');
  expect(a).not.toBe(b);
});

test('a kept connection the handler closes as a doorbell goes out on it costs no failed attempt: it is sent again on a new one', async () => {
  const url = new URL(`http://127.0.0.1:${closing.port}/hook`);
  const ring = () => postPinned(url, pinned, { url: url.href, body: '{}', headers: {} }, { timeoutMs: 2_000 });
  expect(await ring()).toMatchObject({ status: 200, error: null, responseBody: 'ok' });
  expect(await ring()).toMatchObject({ status: 200, error: null, responseBody: 'ok' });
  // The second went out on the kept connection (refused there) and then on a new one.
  expect([...requestsPerConnection.values()]).toEqual([2, 1]);
});
