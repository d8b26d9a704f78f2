import { beforeAll, describe, expect, test } from 'bun:test';
import { verify as octokitVerify } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import { graceMs } from '../src/domain/agents/signing-secrets';
import { doorbellHeaders, SIGNATURE_HEADER } from '../src/domain/deliveries/doorbell-signature';
import { useDashboardHarness } from './support/dashboard';
import { eventually, receiver, type Received } from './support/receiver';
import { FAST_WEBHOOKS, post, untilStep } from './support/webhooks';
import { verifySignature, verifyStandardWebhook } from '../src/webhooks/verify';

// Rotating an agent's webhook signing secret with a grace: a person on the dashboard, the real
// worker ringing a local handler that verifies what it gets with the standardwebhooks library and
// @octokit/webhooks-methods, independently of the service's code.
const h = useDashboardHarness(FAST_WEBHOOKS, { worker: true });
const hook = receiver(() => new Response(null, { status: 204 }));

let cookie: string;
let sender: { username: string; key: string };
beforeAll(async () => {
  await h.invite('rota@example.com', 'rota');
  cookie = await h.signIn('rota@example.com');
  sender = await h.agent('rotation-sender');
});

const as = (method: string, path: string, body?: unknown) => h.send(method, `/dashboard/api${path}`, { cookie, body });
const rotate = (username: string, body: unknown = {}) => as('POST', `/agents/${username}/webhook/rotate-secret`, body);
const headersOf = (req: Received) => Object.fromEntries(req.headers) as Record<string, string>;
const HOUR = 3_600_000;

type Stored = { secret: string; previous: string | null; until: Date | null; setAt: Date; rotatedAt: Date | null };
const stored = async (username: string) =>
  (
    await h.db.sql<Stored[]>`
      select signing_secret as secret, previous_signing_secret as previous, previous_signing_secret_until as until,
             webhook_set_at as "setAt", signing_secret_rotated_at as "rotatedAt"
      from agents where username = ${username}`
  )[0]!;
const auditOf = async (username: string) => [
  ...(await h.db.sql<{ actor: string; before: unknown; after: unknown }[]>`
    select actor, before, after from audit_events where action = 'agent.webhook.secret.rotate' and subject = ${username} order by id`),
];
// As if a rotation with an hour's grace had been made an hour ago: the grace ends now. (A worker
// that holds the secrets learns of it from the rotation's time, as it does of a real rotation; the
// signer's own clock ending a grace is tested below.)
const endGrace = (username: string) => h.db.sql`
  update agents set previous_signing_secret_until = now(), signing_secret_rotated_at = signing_secret_rotated_at - interval '1 hour'
  where username = ${username}`;

// Whether a doorbell as received verifies under `secret`: Standard Webhooks, and the legacy header.
const verifiesStandard = (req: Received, secret: string) => {
  try {
    new Webhook(secret).verify(req.raw, headersOf(req));
    return true;
  } catch {
    return false;
  }
};
const verifiesLegacy = (req: Received, secret: string) => octokitVerify(secret, req.raw, headersOf(req)['x-signature-256']!);

describe('the grace, as people write it', () => {
  test('0, minutes, hours or days up to 7 days; left out, the default; anything else is refused naming grace', () => {
    expect([graceMs('0', 5), graceMs('90m', 5), graceMs(' 24h ', 5), graceMs('7d', 5), graceMs('168h', 5)]).toEqual([0, 90 * 60_000, 24 * HOUR, 7 * 24 * HOUR, 7 * 24 * HOUR]);
    expect([graceMs(undefined, 5), graceMs(null, 5), graceMs('', 5)]).toEqual([5, 5, 5]);
    for (const bad of ['8d', '169h', '24', '-1h', '1.5h', '1w', 24, true, {}]) {
      expect(() => graceMs(bad, 5)).toThrow('grace must be 0 or a duration of at most 7 days such as 90m, 24h or 7d');
    }
  });
});

describe('the signer', () => {
  const secrets = {
    current: 'whsec_bmV3IG5ldyBuZXcgbmV3IG5ldyBuZXcgbmV3IG5ldyE=',
    previous: 'whsec_b2xkIG9sZCBvbGQgb2xkIG9sZCBvbGQgb2xkIG9sZCE=',
    previousUntil: new Date('2026-11-30T12:00:00Z'),
  };
  const body = '{"event":"message.created","data":{"deliveryId":"d1"}}';
  // What the standardwebhooks library signs for that attempt (its verify checks the timestamp
  // against its own clock, so these attempts' are compared with its signatures instead).
  const library = (secret: string, at: Date) => new Webhook(secret).sign('d1', at, body);

  test("signs with both secrets up to the grace's last millisecond, and from its end with the new one only, by the attempt's time", async () => {
    const during = new Date('2026-11-30T11:59:59.999Z');
    const ended = new Date('2026-11-30T12:00:00.000Z');
    const signedDuring = doorbellHeaders({ deliveryId: 'd1', body, secrets, timestamp: during });
    const signedAfter = doorbellHeaders({ deliveryId: 'd1', body, secrets, timestamp: ended });
    expect(signedDuring['webhook-signature']).toBe(`${library(secrets.current, during)} ${library(secrets.previous, during)}`);
    expect(signedAfter['webhook-signature']).toBe(library(secrets.current, ended));
    expect([await octokitVerify(secrets.previous, body, signedDuring[SIGNATURE_HEADER]), await octokitVerify(secrets.current, body, signedDuring[SIGNATURE_HEADER])]).toEqual([true, false]);
    expect([await octokitVerify(secrets.current, body, signedAfter[SIGNATURE_HEADER]), await octokitVerify(secrets.previous, body, signedAfter[SIGNATURE_HEADER])]).toEqual([true, false]);
    const never = doorbellHeaders({ deliveryId: 'd1', body, secrets: { current: secrets.current, previous: null, previousUntil: null }, timestamp: during });
    expect([never['webhook-signature'], never[SIGNATURE_HEADER]]).toEqual([library(secrets.current, during), signedAfter[SIGNATURE_HEADER]]);
  });
});

describe('rotating on the dashboard', () => {
  test('mints a new secret shown once, keeps the endpoint, signs with the old one until the grace ends, and is on record', async () => {
    const agent = await h.agent('rota-one', { webhookUrl: hook.url('/one') });
    const { deliveryId } = await post(h, sender, agent, { content: 'before the rotation' });
    await untilStep(h, deliveryId, 'notified');
    const before = await stored(agent.username);
    const [health] = await h.db.sql`select * from endpoint_health where agent_id = (select id from agents where username = ${agent.username})`;
    expect(health).toBeDefined();

    const started = Date.now();
    const res = await rotate(agent.username, { grace: '24h' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      data: { username: agent.username, webhookUrl: hook.url('/one'), signingSecret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/), previousSecretExpiresAt: expect.any(String) },
    });
    const { signingSecret, previousSecretExpiresAt } = res.body.data;
    expect(signingSecret).not.toBe(agent.signingSecret);
    const until = new Date(previousSecretExpiresAt).getTime();
    expect(until).toBeGreaterThanOrEqual(started + 24 * HOUR - 2_000);
    expect(until).toBeLessThanOrEqual(Date.now() + 24 * HOUR + 2_000);

    const after = await stored(agent.username);
    expect(after).toEqual({ secret: signingSecret, previous: agent.signingSecret!, until: new Date(previousSecretExpiresAt), setAt: before.setAt, rotatedAt: expect.any(Date) });
    // The same endpoint: its health stays, and so does its version.
    const [healthAfter] = await h.db.sql`select * from endpoint_health where agent_id = (select id from agents where username = ${agent.username})`;
    expect(healthAfter).toEqual(health!);

    expect(await auditOf(agent.username)).toEqual([
      { actor: 'rota', before: { previousSecretExpiresAt: null }, after: { graceMs: 24 * HOUR, previousSecretExpiresAt } },
    ]);
    const [trail] = await h.db.sql`select before::text || after::text as text from audit_events where action = 'agent.webhook.secret.rotate' and subject = ${agent.username}`;
    expect(trail!.text).not.toContain('whsec_');

    const listed = await as('GET', `/agents?q=${agent.username}`);
    expect(listed.body.data.items.map((a: { username: string; previousSecretExpiresAt: string | null }) => [a.username, a.previousSecretExpiresAt])).toEqual([
      [agent.username, previousSecretExpiresAt],
    ]);
    // Revealed afterwards, the secret is the new one.
    expect((await as('GET', `/agents/${agent.username}/webhook/secret`)).body.data.signingSecret).toBe(signingSecret);
  });

  test('again during a grace drops the oldest secret at once: at most two sign; with no grace the old one stops at once', async () => {
    const agent = await h.agent('rota-twice', { webhookUrl: hook.url('/twice') });
    const first = agent.signingSecret!;
    const second = (await rotate(agent.username, { grace: '7d' })).body.data;
    const third = await rotate(agent.username, { grace: '90m' });
    expect(third.status).toBe(200);
    const stillSigning = await stored(agent.username);
    expect([stillSigning.secret, stillSigning.previous]).toEqual([third.body.data.signingSecret, second.signingSecret]);
    expect(stillSigning.previous).not.toBe(first);
    expect(stillSigning.until!.getTime() - stillSigning.rotatedAt!.getTime()).toBe(90 * 60_000);

    const none = await rotate(agent.username, { grace: '0' });
    expect(none.body.data).toEqual({ username: agent.username, webhookUrl: hook.url('/twice'), signingSecret: expect.stringMatching(/^whsec_/), previousSecretExpiresAt: null });
    expect(await stored(agent.username)).toMatchObject({ secret: none.body.data.signingSecret, previous: null, until: null });
    expect((await auditOf(agent.username)).map((e) => [e.before, (e.after as { graceMs: number }).graceMs])).toEqual([
      [{ previousSecretExpiresAt: null }, 7 * 24 * HOUR],
      [{ previousSecretExpiresAt: second.previousSecretExpiresAt }, 90 * 60_000],
      [{ previousSecretExpiresAt: third.body.data.previousSecretExpiresAt }, 0],
    ]);
  });

  test("with no grace given, the deployment's default (24 hours); saving the webhook again ends any grace", async () => {
    const agent = await h.agent('rota-default', { webhookUrl: hook.url('/default') });
    const rotated = await rotate(agent.username);
    const row = await stored(agent.username);
    expect(row.until!.getTime() - row.rotatedAt!.getTime()).toBe(24 * HOUR);
    expect(rotated.body.data.previousSecretExpiresAt).toBe(row.until!.toISOString());

    const saved = await as('PUT', `/agents/${agent.username}/webhook`, { webhookUrl: hook.url('/default') });
    expect(saved.status).toBe(200);
    expect(await stored(agent.username)).toMatchObject({ secret: saved.body.data.signingSecret, previous: null, until: null, rotatedAt: null });
  });

  test('a bad grace is 400 naming it, an agent without a webhook 409, an unknown one 404; nothing changes', async () => {
    const agent = await h.agent('rota-refused', { webhookUrl: hook.url('/refused') });
    const polling = await h.agent('rota-polling');
    for (const grace of ['8d', 'soon', 24]) {
      const res = await rotate(agent.username, { grace });
      expect([res.status, res.body]).toEqual([
        400,
        { success: false, error: 'grace must be 0 or a duration of at most 7 days such as 90m, 24h or 7d', code: 'invalid', field: 'grace' },
      ]);
    }
    expect(await stored(agent.username)).toMatchObject({ secret: agent.signingSecret, previous: null, rotatedAt: null });
    const none = await rotate(polling.username, { grace: '1h' });
    expect([none.status, none.body]).toEqual([409, { success: false, error: 'rota-polling has no webhook, so it has no signing secret to rotate.', code: 'conflict' }]);
    const nobody = await rotate('no-such-agent');
    expect([nobody.status, nobody.body]).toEqual([404, { success: false, error: 'No agent named no-such-agent.', code: 'not_found' }]);
    expect(await auditOf(agent.username)).toEqual([]);
    const signedOut = await h.send('POST', `/dashboard/api/agents/${agent.username}/webhook/rotate-secret`, { body: {} });
    expect(signedOut.status).toBe(401);
  });
});

describe('real doorbells across a rotation', () => {
  test('during the grace both secrets verify with standardwebhooks; X-Signature-256 is the old one; after it only the new', async () => {
    const agent = await h.agent('rota-ring', { webhookUrl: hook.url('/ring') });
    const old = agent.signingSecret!;
    const mine = () => hook.received.filter((r) => r.path === '/ring');
    // The worker learns (and keeps) the secret with this first doorbell.
    const first = await post(h, sender, agent, { content: 'before' });
    await untilStep(h, first.deliveryId, 'notified');
    expect(verifiesStandard(mine()[0]!, old)).toBe(true);

    const fresh = (await rotate(agent.username, { grace: '1h' })).body.data.signingSecret as string;
    const during = await post(h, sender, agent, { content: 'during the grace' });
    await untilStep(h, during.deliveryId, 'notified');
    const ringing = mine()[1]!;
    expect(headersOf(ringing)['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/);
    expect([verifiesStandard(ringing, fresh), verifiesStandard(ringing, old)]).toEqual([true, true]);
    expect(new Webhook(fresh).verify(ringing.raw, headersOf(ringing))).toEqual(JSON.parse(ringing.raw));
    expect([await verifiesLegacy(ringing, old), await verifiesLegacy(ringing, fresh)]).toEqual([true, false]);
    // The receiver kit rolls over with both secrets in hand, whichever scheme it checks.
    const legacy = headersOf(ringing)['x-signature-256'];
    expect([verifySignature(ringing.raw, legacy, [fresh, old]), verifySignature(ringing.raw, legacy, [fresh]), verifySignature(ringing.raw, legacy, [])]).toEqual([true, false, false]);
    expect([verifyStandardWebhook(ringing.raw, headersOf(ringing), [fresh]), verifyStandardWebhook(ringing.raw, headersOf(ringing), [old, fresh])]).toEqual([true, true]);

    await endGrace(agent.username);
    const afterwards = await post(h, sender, agent, { content: 'after the grace' });
    await untilStep(h, afterwards.deliveryId, 'notified');
    const last = mine()[2]!;
    expect(headersOf(last)['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect([verifiesStandard(last, fresh), verifiesStandard(last, old)]).toEqual([true, false]);
    expect([await verifiesLegacy(last, fresh), await verifiesLegacy(last, old)]).toEqual([true, false]);
    expect([verifySignature(last.raw, headersOf(last)['x-signature-256'], [fresh, old]), verifyStandardWebhook(last.raw, headersOf(last), [old])]).toEqual([true, false]);
    expect((await as('GET', `/agents?q=${agent.username}`)).body.data.items[0].previousSecretExpiresAt).toBeNull();
  });

  test('a retry made after the grace ended carries only the new secret', async () => {
    const agent = await h.agent('rota-retry', { webhookUrl: hook.url('/retry') });
    const old = agent.signingSecret!;
    const fresh = (await rotate(agent.username, { grace: '1h' })).body.data.signingSecret as string;
    // The first attempt, made during the grace, is refused; the grace ends before it is answered.
    hook.reply(async (req) => {
      if (req.path !== '/retry' || hook.received.filter((r) => r.path === '/retry').length > 1) return new Response(null, { status: 204 });
      await endGrace(agent.username);
      return new Response(null, { status: 500 });
    });
    try {
      const { deliveryId } = await post(h, sender, agent, { content: 'retried across the end of the grace' });
      await untilStep(h, deliveryId, 'notified');
      const [during, retry] = hook.received.filter((r) => r.path === '/retry');
      expect([verifiesStandard(during!, fresh), verifiesStandard(during!, old)]).toEqual([true, true]);
      expect([verifiesStandard(retry!, fresh), verifiesStandard(retry!, old)]).toEqual([true, false]);
      expect(headersOf(retry!)['webhook-id']).toBe(headersOf(during!)['webhook-id']);
    } finally {
      hook.reply(() => new Response(null, { status: 204 }));
    }
  });

  test('a test event sent during the grace carries both signatures', async () => {
    const agent = await h.agent('rota-test-event', { webhookUrl: hook.url('/test-event') });
    const old = agent.signingSecret!;
    const fresh = (await rotate(agent.username, { grace: '1h' })).body.data.signingSecret as string;
    expect((await as('POST', `/agents/${agent.username}/webhook/test-events`)).status).toBe(202);
    const event = await eventually(async () => hook.received.find((r) => r.path === '/test-event'));
    expect([verifiesStandard(event, fresh), verifiesStandard(event, old)]).toEqual([true, true]);
    expect([await verifiesLegacy(event, old), await verifiesLegacy(event, fresh)]).toEqual([true, false]);
  });
});
