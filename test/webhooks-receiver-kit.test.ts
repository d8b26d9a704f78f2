import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Webhook } from 'standardwebhooks';
import { createWebhookHandler, type MessageCreated } from '../examples/webhook-handler';
import { verifySignature, verifyStandardWebhook } from '../src/webhooks/verify';
import { eventually } from './support/receiver';
import { post, untilStep, useWorkerHarness, sign } from './support/webhooks';

const { h } = useWorkerHarness();

describe('verifySignature', () => {
  const body = '{"event":"message.created","data":{"deliveryId":"d1"}}';
  const secret = 'whsec_abc';

  test('accepts the signature of the exact bytes, as text or bytes', () => {
    expect(verifySignature(body, sign(body, secret), secret)).toBe(true);
    expect(verifySignature(new TextEncoder().encode(body), sign(body, secret), secret)).toBe(true);
  });

  test('rejects another secret, changed bytes, a missing, bare or malformed header', () => {
    expect(verifySignature(body, sign(body, 'whsec_other'), secret)).toBe(false);
    expect(verifySignature(body + ' ', sign(body, secret), secret)).toBe(false);
    expect(verifySignature(JSON.stringify(JSON.parse(body), null, 1), sign(body, secret), secret)).toBe(false);
    expect(verifySignature(body, null, secret)).toBe(false);
    expect(verifySignature(body, sign(body, secret).slice('sha256='.length), secret)).toBe(false);
    expect(verifySignature(body, 'sha256=zz', secret)).toBe(false);
  });
});

describe('verifyStandardWebhook', () => {
  const body = '{"event":"message.created","data":{"deliveryId":"d1"}}';
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const sentAt = new Date('2021-06-01T10:00:00Z');
  const after = (seconds: number) => ({ now: new Date(sentAt.getTime() + seconds * 1000) });
  // Signed by the standardwebhooks library itself, independently of the service's code.
  const signed = (raw: string, key = secret, at = sentAt, id = 'd1') => ({
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(key).sign(id, at, raw),
  });

  test('accepts the signature of the exact bytes, as text or bytes, from a Headers object or a plain record', () => {
    expect(verifyStandardWebhook(body, signed(body), secret, after(0))).toBe(true);
    expect(verifyStandardWebhook(new TextEncoder().encode(body), new Headers(signed(body)), secret, after(0))).toBe(true);
    const shouted = Object.fromEntries(Object.entries(signed(body)).map(([k, v]) => [k.toUpperCase(), v]));
    expect(verifyStandardWebhook(body, shouted, secret, after(0))).toBe(true);
  });

  test('accepts a matching v1 signature among several space-separated ones, and ignores other versions', () => {
    const headers = signed(body);
    const good = headers['webhook-signature'];
    const other = signed(body, 'whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBrZXk=')['webhook-signature'];
    expect(verifyStandardWebhook(body, { ...headers, 'webhook-signature': `${other} ${good}` }, secret, after(0))).toBe(true);
    expect(verifyStandardWebhook(body, { ...headers, 'webhook-signature': `${good} ${other}` }, secret, after(0))).toBe(true);
    expect(verifyStandardWebhook(body, { ...headers, 'webhook-signature': other }, secret, after(0))).toBe(false);
    expect(verifyStandardWebhook(body, { ...headers, 'webhook-signature': good.replace('v1,', 'v2,') }, secret, after(0))).toBe(false);
  });

  test('refuses a timestamp more than five minutes old or ahead, and takes another tolerance when given', () => {
    expect(verifyStandardWebhook(body, signed(body), secret, after(300))).toBe(true);
    expect(verifyStandardWebhook(body, signed(body), secret, after(-300))).toBe(true);
    expect(verifyStandardWebhook(body, signed(body), secret, after(301))).toBe(false);
    expect(verifyStandardWebhook(body, signed(body), secret, after(-301))).toBe(false);
    expect(verifyStandardWebhook(body, signed(body), secret, { ...after(30), toleranceSeconds: 10 })).toBe(false);
    expect(verifyStandardWebhook(body, signed(body), secret, { ...after(30), toleranceSeconds: 60 })).toBe(true);
  });

  test('with no options compares the timestamp with the clock', () => {
    expect(verifyStandardWebhook(body, signed(body, secret, new Date()), secret)).toBe(true);
    expect(verifyStandardWebhook(body, signed(body), secret)).toBe(false);
  });

  test('rejects changed bytes, another secret, another id or timestamp than signed, missing or malformed headers', () => {
    const headers = signed(body);
    expect(verifyStandardWebhook(body + ' ', headers, secret, after(0))).toBe(false);
    expect(verifyStandardWebhook(JSON.stringify(JSON.parse(body), null, 1), headers, secret, after(0))).toBe(false);
    expect(verifyStandardWebhook(body, headers, 'whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBrZXk=', after(0))).toBe(false);
    expect(verifyStandardWebhook(body, { ...headers, 'webhook-id': 'd2' }, secret, after(0))).toBe(false);
    expect(verifyStandardWebhook(body, { ...headers, 'webhook-timestamp': String(Number(headers['webhook-timestamp']) + 1) }, secret, after(0))).toBe(false);
    expect(verifyStandardWebhook(body, { ...headers, 'webhook-timestamp': `${headers['webhook-timestamp']}.0` }, secret, after(0))).toBe(false);
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const) {
      const { [name]: _dropped, ...rest } = headers;
      expect(verifyStandardWebhook(body, rest, secret, after(0))).toBe(false);
    }
    expect(verifyStandardWebhook(body, { ...headers, 'webhook-signature': headers['webhook-signature'].slice(3) }, secret, after(0))).toBe(false);
    expect(verifyStandardWebhook(body, { ...headers, 'webhook-signature': 'v1,zz' }, secret, after(0))).toBe(false);
  });
});

describe('the example handler', () => {
  const handed: MessageCreated[] = [];
  const logged: string[] = [];
  let service: ReturnType<typeof h.app.listen>;
  let handler: ReturnType<typeof Bun.serve>;
  let agent: { username: string; key: string; signingSecret?: string };
  // Both schemes as the service signs a doorbell, computed here independently of its code.
  const signedBoth = (raw: string, secret: string, at = new Date(), id = 'delivery-id') => ({
    'x-signature-256': sign(raw, secret),
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, at, raw),
  });

  beforeAll(async () => {
    service = h.app.listen({ hostname: '127.0.0.1', port: 0 });
    let handle: ((req: Request) => Promise<Response>) | null = null;
    handler = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: (req) => handle!(req) });
    agent = await h.agent('kit-agent', { webhookUrl: `http://127.0.0.1:${handler.port}/webhook` });
    handle = createWebhookHandler({
      signingSecret: agent.signingSecret!,
      agentKey: agent.key,
      serviceUrl: `http://127.0.0.1:${service.server!.port}`,
      // An agent that is still working on "slow agent" when the test ends.
      onMessage: (event) => {
        handed.push(event);
        if (event.summary === 'slow agent') return new Promise<void>(() => {});
      },
      log: (line) => void logged.push(line),
    });
  });
  afterAll(async () => {
    handler?.stop(true);
    await service?.stop();
  });

  const send = (raw: string, headers: Record<string, string>) =>
    fetch(`http://127.0.0.1:${handler.port}/webhook`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: raw });
  const otherSecret = 'whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBrZXk=';

  // The handler hands events on in the order it took them, each on a later turn of the event loop.
  // Once a valid event sent afterwards has been handed on, whatever an earlier request was going
  // to hand on has been too: what is handed on then, markers aside, is final.
  let markers = 0;
  const handedOnByNow = async () => {
    const deliveryId = `marker-${++markers}`;
    const raw = JSON.stringify({ event: 'message.created', data: { deliveryId } });
    expect((await send(raw, signedBoth(raw, agent.signingSecret!))).status).toBe(204);
    await eventually(async () => handed.some((e) => e.deliveryId === deliveryId));
    return handed.filter((e) => !e.deliveryId.startsWith('marker-'));
  };

  test('takes a real doorbell, answers 2xx, hands it on once and reports it delivered', async () => {
    const sender = await h.agent('kit-sender');
    const { deliveryId, messageId } = await post(h, sender, agent, { content: 'hello handler' });
    await untilStep(h, deliveryId, 'delivered');
    expect(handed).toEqual([expect.objectContaining({ deliveryId, messageId, sender: 'kit-sender', summary: 'hello handler' })]);

    // The doorbell's 204 is recorded once its answer is back, which may be after the handler's
    // report of delivered (it reports as soon as it has handed the event on, below).
    const attempt = await eventually(async () => {
      const [row] = await h.db.sql<{ status: number }[]>`select status from delivery_attempts where delivery_id = ${deliveryId} and status = 204`;
      return row ?? null;
    });
    expect(attempt.status).toBe(204);
    // The same delivery again (a retry, say): answered, not handed on a second time.
    const raw = JSON.stringify({ event: 'message.created', data: handed[0] });
    const again = await send(raw, signedBoth(raw, agent.signingSecret!));
    expect(again.status).toBe(204);
    expect((await handedOnByNow()).map((e) => e.deliveryId)).toEqual([deliveryId]);
  });

  test('reports delivered as soon as the event is handed on, not after the agent has worked on it', async () => {
    const sender = await h.agent('kit-slow-sender');
    const { deliveryId } = await post(h, sender, agent, { content: 'slow agent' });
    await untilStep(h, deliveryId, 'delivered');
    expect(handed.some((e) => e.deliveryId === deliveryId)).toBe(true);
  });

  test('a handler that reports before it answers still leaves the notified time recorded', async () => {
    const sender = await h.agent('kit-eager-sender');
    let eager: ReturnType<typeof Bun.serve> | null = null;
    const reporter = { key: '' };
    eager = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      fetch: async (req) => {
        const { data } = (await req.json()) as { data: MessageCreated };
        await fetch(`http://127.0.0.1:${service.server!.port}/api/deliveries/${data.deliveryId}/delivered`, {
          method: 'POST',
          headers: { authorization: `Bearer ${reporter.key}` },
        });
        return new Response(null, { status: 204 });
      },
    });
    try {
      const recipient = await h.agent('kit-eager', { webhookUrl: `http://127.0.0.1:${eager.port}/hook` });
      reporter.key = recipient.key;
      const { deliveryId } = await post(h, sender, recipient, { content: 'report first' });
      await untilStep(h, deliveryId, 'delivered');
      const row = await eventually(async () => {
        const [r] = await h.db.sql`select step, notified_at, delivered_at from deliveries where id = ${deliveryId}`;
        return r!.notified_at ? r : null;
      });
      expect(row.step).toBe('delivered');
      expect(row.notified_at).toBeInstanceOf(Date);
    } finally {
      eager.stop(true);
    }
  });

  test('a bad or missing signature gets 401, nothing is handed on and the body is not logged', async () => {
    const raw = JSON.stringify({ event: 'message.created', data: { deliveryId: 'forged-secret-payload' } });
    expect((await send(raw, signedBoth(raw, otherSecret))).status).toBe(401);
    expect((await send(raw, {})).status).toBe(401);
    expect((await handedOnByNow()).some((e) => e.deliveryId === 'forged-secret-payload')).toBe(false);
    expect(logged.join('\n')).not.toContain('forged-secret-payload');
  });

  test('an unknown event is acknowledged with 2xx and ignored', async () => {
    const before = await handedOnByNow();
    const raw = JSON.stringify({ event: 'thread.closed', data: { deliveryId: 'x', threadId: 'y' } });
    expect((await send(raw, signedBoth(raw, agent.signingSecret!))).status).toBe(204);
    expect(await handedOnByNow()).toEqual(before);
  });

  test('by default checks the Standard Webhooks headers: a replay older than five minutes or X-Signature-256 alone gets 401', async () => {
    const raw = JSON.stringify({ event: 'message.created', data: { deliveryId: 'replayed-payload' } });
    const replay = signedBoth(raw, agent.signingSecret!, new Date(Date.now() - 6 * 60_000));
    expect((await send(raw, replay)).status).toBe(401);
    expect((await send(raw, { 'x-signature-256': sign(raw, agent.signingSecret!) })).status).toBe(401);
    expect((await handedOnByNow()).some((e) => e.deliveryId === 'replayed-payload')).toBe(false);
  });

  test("with scheme 'x-signature-256' checks the contract's header alone", async () => {
    const contractOnly = createWebhookHandler({
      signingSecret: agent.signingSecret!,
      agentKey: agent.key,
      serviceUrl: `http://127.0.0.1:${service.server!.port}`,
      scheme: 'x-signature-256',
      onMessage: () => {},
      log: () => {},
    });
    const raw = JSON.stringify({ event: 'thread.closed', data: { deliveryId: 'x' } });
    const request = (headers: Record<string, string>) => new Request('http://handler.test/webhook', { method: 'POST', headers, body: raw });
    expect((await contractOnly(request({ 'x-signature-256': sign(raw, agent.signingSecret!) }))).status).toBe(204);
    expect((await contractOnly(request({ 'x-signature-256': sign(raw, otherSecret) }))).status).toBe(401);
  });

  test('the delivered report needs the agent key, not the signing secret', async () => {
    const sender = await h.agent('kit-sender-2');
    const { deliveryId } = await post(h, sender, agent, { content: 'second' });
    await eventually(async () => handed.some((e) => e.deliveryId === deliveryId));
    const withSecret = await h.call('POST', `/api/deliveries/${deliveryId}/delivered`, { key: agent.signingSecret });
    expect(withSecret.status).toBe(401);
    await untilStep(h, deliveryId, 'delivered');
  });
});
