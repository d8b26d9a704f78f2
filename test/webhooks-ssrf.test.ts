import { describe, expect, test } from 'bun:test';
import { postPinned, sendDoorbell } from '../src/webhooks/send';
import { receiver } from './support/receiver';
import { attemptRows, post, untilStep, useWorkerHarness } from './support/webhooks';

// The production rules: https only, public addresses only.
const { h } = useWorkerHarness({ WEBHOOK_ALLOW_LOCAL: 'false' });
const hook = receiver();
const doorbell = (url: string) => ({ url, body: '{"event":"message.created","data":{}}', headers: { 'X-Signature-256': 'sha256=00' } });
const strict = { policy: { allowLocal: false }, timeoutMs: 1_000 };

describe('when a doorbell is sent', () => {
  test.each([
    ['plain http', `http://127.0.0.1:PORT/hook`, 'refused to send: webhookUrl must use https:// unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook)'],
    ['loopback', `https://127.0.0.1:PORT/hook`, 'refused to send: webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); 127.0.0.1 resolves to a private, loopback or reserved one'],
    ['a name for loopback', `https://localhost:PORT/hook`, 'refused to send: webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); localhost resolves to a private, loopback or reserved one'],
    ['private', 'https://10.20.30.40/hook', 'refused to send: webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); 10.20.30.40 resolves to a private, loopback or reserved one'],
    ['the metadata address', 'https://169.254.169.254/latest/meta-data', 'refused to send: webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); 169.254.169.254 resolves to a private, loopback or reserved one'],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/hook', 'refused to send: webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); ::ffff:7f00:1 resolves to a private, loopback or reserved one'],
    ['IPv4-translated loopback', `https://[::ffff:0:127.0.0.1]:PORT/hook`, 'refused to send: webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); ::ffff:0:7f00:1 resolves to a private, loopback or reserved one'],
    ['local-use NAT64', 'https://[64:ff9b:1::a00:1]/hook', 'refused to send: webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); 64:ff9b:1::a00:1 resolves to a private, loopback or reserved one'],
    ['a well-known service port', 'https://hooks.example.invalid:25/hook', 'refused to send: webhookUrl must use port 443 or a port from 1024 to 65535 unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook)'],
    ['a control character', 'https://hooks.example.invalid/hook\n', 'refused to send: webhookUrl must not contain spaces or control characters such as a newline'],
  ])('%s is refused without connecting', async (_name, url, error) => {
    const outcome = await sendDoorbell(doorbell(url.replace('PORT', String(hook.port))), strict);
    expect(outcome).toEqual({ status: null, error });
    expect(hook.received).toHaveLength(0);
  });

  test('a stored URL that now points inside is checked again and the delivery fails without a request', async () => {
    const sender = await h.agent('ssrf-sender');
    const recipient = await h.agent('ssrf-recipient');
    // Passed when it was saved; what it resolves to now is what counts.
    await h.db.sql`
      update agents set webhook_url = ${`https://127.0.0.1:${hook.port}/inside`}, signing_secret = 'whsec_test'
      where username = ${recipient.username}`;
    const { deliveryId } = await post(h, sender, recipient, { content: 'reach inside' });
    const d = await untilStep(h, deliveryId, 'failed');
    expect(d.error).toBe(
      'Gave up after 4 attempts; the last one: refused to send: webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); 127.0.0.1 resolves to a private, loopback or reserved one.',
    );
    expect((await attemptRows(h, deliveryId)).every((a) => a.status === null)).toBe(true);
    expect(hook.received).toHaveLength(0);
  });
});

describe('the connection goes to the checked address', () => {
  test('no second lookup: a name is connected to the pinned address, and Host stays the name', async () => {
    const url = new URL(`http://rebinding.invalid:${hook.port}/pinned`);
    const outcome = await postPinned(url, { address: '127.0.0.1', family: 4 }, doorbell(url.href), { timeoutMs: 1_000 });
    expect(outcome).toMatchObject({ status: 200, error: null, responseBody: 'ok' });
    const req = hook.received.find((r) => r.path === '/pinned')!;
    expect(req.headers.get('host')).toBe(`rebinding.invalid:${hook.port}`);
  });

  test('over TLS the certificate is still checked against the URL host name', async () => {
    const tls = { key: await Bun.file('test/fixtures/hook.test-key.pem').text(), cert: await Bun.file('test/fixtures/hook.test-cert.pem').text() };
    const server = Bun.serve({ hostname: '127.0.0.1', port: 0, tls, fetch: (r) => new Response(r.headers.get('host')) });
    try {
      // A process that trusts the test certificate, as a real one trusts public CAs.
      const run = async (host: string) => {
        const script = `
          import { postPinned } from './src/webhooks/send';
          const url = new URL('https://${host}:${server.port}/tls');
          const outcome = await postPinned(url, { address: '127.0.0.1', family: 4 }, { url: url.href, body: '{}', headers: { 'X-Signature-256': 'sha256=00' } }, { timeoutMs: 2000 });
          console.log(JSON.stringify(outcome));`;
        const proc = Bun.spawn(['bun', '-e', script], {
          env: { ...process.env, NODE_EXTRA_CA_CERTS: 'test/fixtures/hook.test-cert.pem' },
          stdout: 'pipe',
        });
        return JSON.parse(await new Response(proc.stdout).text());
      };
      expect(await run('hook.test')).toMatchObject({ status: 200, error: null });
      const wrongName = await run('other.test');
      expect(wrongName.status).toBeNull();
      expect(wrongName.error).toContain('other.test');
    } finally {
      server.stop(true);
    }
  });
});
