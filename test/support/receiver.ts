import { afterAll } from 'bun:test';

export type Received = { at: number; path: string; headers: Headers; raw: string };
type Reply = (req: Received, index: number) => Response | Promise<Response>;

// A real local webhook handler on 127.0.0.1 that records every request it gets. `reply` decides
// the answer per request (default 200), and can be swapped between steps of a test.
export function receiver(reply: Reply = () => new Response('ok')) {
  const received: Received[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const state = { reply };
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const url = new URL(req.url);
      const entry = { at: performance.now(), path: url.pathname, headers: req.headers, raw: await req.text() };
      received.push(entry);
      for (const w of waiters.filter((w) => received.length >= w.count)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      return state.reply(entry, received.length - 1);
    },
  });
  afterAll(() => server.stop(true));
  return {
    url: (path = '/hook') => `http://127.0.0.1:${server.port}${path}`,
    port: server.port!,
    received,
    reply: (next: Reply) => {
      state.reply = next;
    },
    // Resolves once `count` requests have arrived in all; fails the test after `timeoutMs`.
    waitFor: (count: number, timeoutMs = 5_000) =>
      new Promise<Received[]>((resolve, reject) => {
        if (received.length >= count) return resolve(received);
        const timer = setTimeout(() => reject(new Error(`expected ${count} requests, got ${received.length}`)), timeoutMs);
        waiters.push({ count, resolve: () => (clearTimeout(timer), resolve(received)) });
      }),
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Polls until `check` returns a truthy value; fails after `timeoutMs`.
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 5_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(20);
  }
}
