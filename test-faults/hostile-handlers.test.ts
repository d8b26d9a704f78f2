import { afterAll, expect, test } from 'bun:test';
import { createServer, type Socket } from 'node:net';
import { freePort } from '../test/support/ports';
import { eventually, receiver } from '../test/support/receiver';
import { attemptRows, deliveryRow, post, useWorkerHarness } from '../test/support/webhooks';

// Handlers that misbehave in every way we know of. Each doorbell ends in the right step with the
// error recorded, and none of them holds up a healthy agent's doorbell.
const TIMEOUT_MS = 800;
const { h } = useWorkerHarness({ WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS), WEBHOOK_RETRY_DELAYS_MS: '50,100,150' });

const healthyArrivals = new Map<string, number>();
const hook = receiver(async (req) => {
  switch (req.path) {
    case '/healthy':
      healthyArrivals.set(JSON.parse(req.raw).data.messageId, performance.now());
      return new Response('ok');
    case '/500':
      return new Response('boom', { status: 500 });
    case '/503':
      return new Response('busy', { status: 503 });
    case '/404':
      return new Response('gone', { status: 404 });
    case '/401':
      return new Response('bad signature', { status: 401 });
    case '/redirect':
      return new Response(null, { status: 302, headers: { location: hook.url('/healthy') } });
    case '/slow':
      await Bun.sleep(TIMEOUT_MS / 2);
      return new Response('ok');
    case '/huge':
      // 64 MiB, streamed: the sender must read the status and cut the rest off.
      return new Response(
        new ReadableStream({
          pull(controller) {
            controller.enqueue(new Uint8Array(1 << 20));
          },
        }),
      );
    case '/silent':
      await Bun.sleep(60_000);
      return new Response('too late');
  }
  return new Response('unexpected', { status: 418 });
});

// A raw TCP handler that reads the request and resets the connection halfway through its answer.
const sockets = new Set<Socket>();
const resetting = createServer((socket) => {
  sockets.add(socket);
  socket.once('data', () => {
    socket.write('HTTP/1.1 20');
    setTimeout(() => socket.resetAndDestroy(), 10);
  });
});
await new Promise<void>((resolve) => resetting.listen(0, '127.0.0.1', resolve));
afterAll(() => {
  for (const s of sockets) s.destroy();
  resetting.close();
});

test('each hostile handler ends in the right step with its error, without slowing a healthy one', async () => {
  const sender = await h.agent('hostile-sender');
  const closedPort = await freePort();
  const resetPort = (resetting.address() as { port: number }).port;
  const cases = [
    { name: 'status-500', url: hook.url('/500'), step: 'failed', attempts: 4, error: 'Gave up after 4 attempts; the last one: the handler answered HTTP 500.' },
    { name: 'status-503', url: hook.url('/503'), step: 'failed', attempts: 4, error: 'Gave up after 4 attempts; the last one: the handler answered HTTP 503.' },
    { name: 'status-404', url: hook.url('/404'), step: 'failed', attempts: 4, error: 'Gave up after 4 attempts; the last one: the handler answered HTTP 404.' },
    { name: 'status-401', url: hook.url('/401'), step: 'failed', attempts: 1, error: 'The handler answered HTTP 401: it could not verify the signature; not retried.' },
    { name: 'redirect', url: hook.url('/redirect'), step: 'failed', attempts: 4, error: 'Gave up after 4 attempts; the last one: the handler answered HTTP 302.' },
    { name: 'silent', url: hook.url('/silent'), step: 'failed', attempts: 4, error: `Gave up after 4 attempts; the last one: no answer within ${TIMEOUT_MS} ms (timed out).` },
    { name: 'refused', url: `http://127.0.0.1:${closedPort}/hook`, step: 'failed', attempts: 4, error: expect.stringMatching(/^Gave up after 4 attempts; the last one: connection failed \(ECONNREFUSED\)/) },
    { name: 'reset', url: `http://127.0.0.1:${resetPort}/hook`, step: 'failed', attempts: 4, error: expect.stringMatching(/^Gave up after 4 attempts; the last one: connection failed/) },
    { name: 'slow', url: hook.url('/slow'), step: 'notified', attempts: 1, error: null },
    { name: 'huge', url: hook.url('/huge'), step: 'notified', attempts: 1, error: null },
  ];
  const deliveries = [];
  for (const c of cases) {
    const recipient = await h.agent(`hostile-${c.name}`, { webhookUrl: c.url });
    deliveries.push({ ...c, ...(await post(h, sender, recipient, { content: `to ${c.name}` })) });
  }

  // While the hostile doorbells are in flight, a healthy agent's doorbells still ring at once.
  const healthy = await h.agent('healthy-hook', { webhookUrl: hook.url('/healthy') });
  const latencies: number[] = [];
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    const { messageId } = await post(h, sender, healthy, { content: `healthy ${i}` });
    const at = await eventually(async () => healthyArrivals.get(messageId));
    latencies.push(at - started);
    await Bun.sleep(100);
  }
  expect(Math.max(...latencies)).toBeLessThan(TIMEOUT_MS);

  for (const d of deliveries) {
    const row = await eventually(async () => {
      const r = await deliveryRow(h, d.deliveryId);
      return r.step === d.step ? r : null;
    }, 10_000);
    expect({ name: d.name, step: row.step, failedStep: row.failedStep, error: row.error }).toEqual({
      name: d.name,
      step: d.step,
      failedStep: d.step === 'failed' ? 'accepted' : null,
      error: d.error,
    });
    const attempts = await attemptRows(h, d.deliveryId);
    expect({ name: d.name, attempts: attempts.length }).toEqual({ name: d.name, attempts: d.attempts });
    // Every attempt is logged with what happened: a status, or the connection's error.
    for (const a of attempts) expect(a.status !== null || (a.error?.length ?? 0) > 0).toBe(true);
  }
  // A redirect is an answer, not an instruction: the target never saw the redirected doorbell.
  expect([...healthyArrivals.keys()]).toHaveLength(5);
  console.log(`hostile handlers: healthy doorbells took ${latencies.map(Math.round).join(', ')} ms while hostile ones were in flight`);
}, 60_000);
