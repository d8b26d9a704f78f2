import { describe, expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { verify as octokitVerify } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import { resendDelivery } from '../src/domain/deliveries/delivery-steps';
import { newSigningSecret } from '../src/domain/agents/keys';
import { verifyStandardWebhook } from '../src/webhooks/verify';
import { receiver, type Received } from './support/receiver';
import { post, untilStep, useWorkerHarness } from './support/webhooks';
import { BY_CLI } from '../src/domain/people/audit';

// The first retry waits over a second, so that two attempts of one delivery fall in different
// Unix seconds and their webhook-timestamp headers must differ.
const { h } = useWorkerHarness({ WEBHOOK_RETRY_DELAYS_MS: '1100,50,50' });
const hook = receiver();

let agentNo = 0;
const agents = async () => {
  const n = ++agentNo;
  const path = `/standard-${n}`;
  const sender = await h.agent(`std-sender-${n}`);
  const recipient = await h.agent(`std-hooked-${n}`, { webhookUrl: hook.url(path) });
  return { sender, recipient, path, mine: () => hook.received.filter((r) => r.path === path) };
};

const headersOf = (req: Received) => Object.fromEntries(req.headers) as Record<string, string>;

// Each attempt's time in Unix seconds, in the order the attempts were made.
const attemptSeconds = async (deliveryId: string) =>
  (await h.db.sql<{ at: Date }[]>`
    select attempted_at as at from delivery_attempts where delivery_id = ${deliveryId} order by id`).map((a) =>
    String(Math.floor(a.at.getTime() / 1000)),
  );

// A secret of the form minted before: base64url of 32 random bytes, holding `-` or `_` or neither.
const oldFormSecret = (withUrlCharacters: boolean) => {
  for (;;) {
    const encoded = randomBytes(32).toString('base64url');
    if (/[-_]/.test(encoded) === withUrlCharacters) return `whsec_${encoded}`;
  }
};

describe('signing secrets', () => {
  test('200 newly minted secrets are whsec_ and standard base64 of 32 bytes, and the standardwebhooks library accepts every one', () => {
    for (let i = 0; i < 200; i++) {
      const secret = newSigningSecret();
      const key = (new Webhook(secret) as unknown as { key: Uint8Array }).key;
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      expect(Buffer.from(key)).toEqual(Buffer.from(secret.slice('whsec_'.length), 'base64'));
      expect(key).toHaveLength(32);
    }
  });
});

describe('a real doorbell', () => {
  test('verifies unchanged with the standardwebhooks library and with @octokit/webhooks-methods', async () => {
    const { sender, recipient, mine } = await agents();
    const secret = recipient.signingSecret!;
    const { deliveryId } = await post(h, sender, recipient, { content: 'standard doorbell' });
    await untilStep(h, deliveryId, 'notified');
    const [req] = mine();
    const headers = headersOf(req!);

    expect(headers['webhook-id']).toBe(deliveryId);
    expect([headers['webhook-timestamp']]).toEqual(await attemptSeconds(deliveryId));
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(new Webhook(secret).verify(req!.raw, headers)).toEqual(JSON.parse(req!.raw));
    expect(() => new Webhook(secret).verify(`${req!.raw} `, headers)).toThrow('No matching signature found');

    expect(await octokitVerify(secret, req!.raw, headers['x-signature-256']!)).toBe(true);
    expect(await octokitVerify(newSigningSecret(), req!.raw, headers['x-signature-256']!)).toBe(false);
  });

  test('keeps webhook-id the deliveryId across retries and a resend, with webhook-timestamp the time of each attempt', async () => {
    const { sender, recipient, path, mine } = await agents();
    hook.reply((req) => new Response(null, { status: req.path === path && mine().length <= 4 ? 500 : 204 }));
    const { deliveryId } = await post(h, sender, recipient, { content: 'retry and resend me' });
    await untilStep(h, deliveryId, 'failed');
    await resendDelivery(h.db.sql, BY_CLI, deliveryId);
    await untilStep(h, deliveryId, 'notified');

    const reqs = mine();
    expect(reqs).toHaveLength(5);
    expect(reqs.map((r) => r.headers.get('webhook-id'))).toEqual(Array(5).fill(deliveryId));
    const stamps = reqs.map((r) => r.headers.get('webhook-timestamp'));
    expect(stamps).toEqual(await attemptSeconds(deliveryId));
    expect(Number(stamps[1])).toBeGreaterThan(Number(stamps[0]));
    for (const req of reqs) expect(new Webhook(recipient.signingSecret!).verify(req.raw, headersOf(req))).toEqual(JSON.parse(req.raw));
    // The body and the contract's signature stay the same bytes throughout.
    expect(new Set(reqs.map((r) => r.raw)).size).toBe(1);
    expect(new Set(reqs.map((r) => r.headers.get('x-signature-256'))).size).toBe(1);
  });

  test('under a secret minted in the old base64url form is signed with the bytes that secret encodes', async () => {
    const { sender, recipient, mine } = await agents();
    const old = oldFormSecret(true);
    await h.db.sql`update agents set signing_secret = ${old} where username = ${recipient.username}`;
    const { deliveryId } = await post(h, sender, recipient, { content: 'old secret' });
    await untilStep(h, deliveryId, 'notified');
    const [req] = mine();
    const headers = headersOf(req!);

    // The npm library refuses such a secret as a string, and verifies with its decoded bytes.
    expect(() => new Webhook(old)).toThrow('Base64Coder: incorrect characters for decoding');
    const bytes = Buffer.from(old.slice('whsec_'.length), 'base64url');
    expect(new Webhook(bytes, { format: 'raw' }).verify(req!.raw, headers)).toEqual(JSON.parse(req!.raw));
    expect(verifyStandardWebhook(req!.raw, req!.headers, old)).toBe(true);
    expect(await octokitVerify(old, req!.raw, headers['x-signature-256']!)).toBe(true);

    // An old secret without `-` or `_` is standard base64 as well, and the library takes it as is.
    const clean = oldFormSecret(false);
    const cleanKey = (new Webhook(clean) as unknown as { key: Uint8Array }).key;
    expect(Buffer.from(cleanKey)).toEqual(Buffer.from(clean.slice('whsec_'.length), 'base64url'));
  });
});
