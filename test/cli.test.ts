import { describe, expect, test } from 'bun:test';
import { runCommand } from '../src/cli/commands';
import { hashKey } from '../src/domain/agents/keys';
import { uniqueName, useHarness } from './support/harness';

const h = useHarness();
const run = (...argv: string[]) => runCommand({ sql: h.db.sql, config: h.config }, argv);

describe('admin CLI commands', () => {
  test('agents create prints the key once and stores only its hash', async () => {
    const name = uniqueName('cli');
    const out = (await run('agents', 'create', name)) as { username: string; apiKey: string };
    expect(out).toEqual({ username: name, apiKey: expect.stringMatching(/^agt_[A-Za-z0-9_-]{43}$/) });
    const [row] = await h.db.sql`select key_hash, webhook_url from agents where username = ${name}`;
    expect(Buffer.from(row!.key_hash)).toEqual(hashKey(out.apiKey));
    expect(row!.webhook_url).toBeNull();
    await expect(run('agents', 'create', name)).rejects.toThrow(`An agent named ${name} already exists.`);
  });

  test('agents and people share one namespace of usernames', async () => {
    const name = uniqueName('shared');
    await run('people', 'invite', `${name}@example.com`, name);
    await expect(run('agents', 'create', name)).rejects.toThrow(`A person is already named ${name}; choose another username.`);
    const [count] = await h.db.sql`select count(*)::int as n from agents where username = ${name}`;
    expect(count!.n).toBe(0);
  });

  test('agents create --webhook mints a signing secret', async () => {
    const name = uniqueName('cli');
    const out = await run('agents', 'create', name, '--webhook', 'http://127.0.0.1:9/hook');
    expect(out).toEqual({
      username: name,
      apiKey: expect.stringMatching(/^agt_/),
      webhookUrl: 'http://127.0.0.1:9/hook',
      signingSecret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
  });

  test('archive and unarchive', async () => {
    const name = uniqueName('cli');
    await run('agents', 'create', name);
    expect(await run('agents', 'archive', name)).toEqual({ username: name, archived: true });
    const [archived] = await h.db.sql`select archived_at from agents where username = ${name}`;
    expect(archived!.archived_at).toBeInstanceOf(Date);
    expect(await run('agents', 'unarchive', name)).toEqual({ username: name, archived: false });
    const [restored] = await h.db.sql`select archived_at from agents where username = ${name}`;
    expect(restored!.archived_at).toBeNull();
    await expect(run('agents', 'archive', 'no-such')).rejects.toThrow('No agent named no-such.');
  });

  test('webhooks set mints a new secret every time; remove discards it', async () => {
    const name = uniqueName('cli');
    await run('agents', 'create', name);
    const first = (await run('webhooks', 'set', name, 'http://127.0.0.1:9/a')) as { signingSecret: string };
    const second = (await run('webhooks', 'set', name, 'http://127.0.0.1:9/a')) as Record<string, string>;
    expect(second).toEqual({ username: name, webhookUrl: 'http://127.0.0.1:9/a', signingSecret: expect.stringMatching(/^whsec_/) });
    expect(second.signingSecret).not.toBe(first.signingSecret);
    expect(await run('webhooks', 'remove', name)).toEqual({ username: name, webhookUrl: null });
    const [row] = await h.db.sql`select webhook_url, signing_secret from agents where username = ${name}`;
    expect({ ...row }).toEqual({ webhook_url: null, signing_secret: null });
  });

  test('webhooks rotate-secret mints a new secret and keeps the old one signing for the grace given, or the default', async () => {
    const name = uniqueName('cli');
    const created = (await run('agents', 'create', name, '--webhook', 'http://127.0.0.1:9/r')) as { signingSecret: string };
    const rotated = (await run('webhooks', 'rotate-secret', name, '--grace', '90m')) as Record<string, string>;
    expect(rotated).toEqual({ username: name, webhookUrl: 'http://127.0.0.1:9/r', signingSecret: expect.stringMatching(/^whsec_/), previousSecretExpiresAt: expect.any(String) });
    const [row] = await h.db.sql`
      select signing_secret, previous_signing_secret, extract(epoch from previous_signing_secret_until - signing_secret_rotated_at)::int as grace from agents where username = ${name}`;
    expect({ ...row }).toEqual({ signing_secret: rotated.signingSecret, previous_signing_secret: created.signingSecret, grace: 5_400 });
    expect(((await run('webhooks', 'rotate-secret', name)) as Record<string, string>).previousSecretExpiresAt).toEqual(expect.any(String));
    const [byDefault] = await h.db.sql`select extract(epoch from previous_signing_secret_until - signing_secret_rotated_at)::int as grace from agents where username = ${name}`;
    expect(byDefault!.grace).toBe(86_400);
    const [audit] = await h.db.sql`select actor, after from audit_events where action = 'agent.webhook.secret.rotate' and subject = ${name} order by id limit 1`;
    expect({ ...audit }).toEqual({ actor: 'cli', after: { graceMs: 5_400_000, previousSecretExpiresAt: rotated.previousSecretExpiresAt } });
    await expect(run('webhooks', 'rotate-secret', name, '--grace', '8d')).rejects.toThrow('grace must be 0 or a duration of at most 7 days such as 90m, 24h or 7d');
    await expect(run('webhooks', 'rotate-secret', name, '--ttl', '1h')).rejects.toThrow('Unknown option --ttl. Usage: webhooks rotate-secret <username> [--grace <duration>]');
  });

  test('webhook URLs must be https and public unless local ones are allowed', async () => {
    const name = uniqueName('cli');
    await run('agents', 'create', name);
    const strict = { sql: h.db.sql, config: { ...h.config, WEBHOOK_ALLOW_LOCAL: false } };
    for (const [url, error] of [
      ['http://example.com/hook', 'webhookUrl must use https:// unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook)'],
      ['https://127.0.0.1/hook', 'webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); 127.0.0.1 resolves to a private, loopback or reserved one'],
      ['https://169.254.169.254/latest', 'webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); 169.254.169.254 resolves to a private, loopback or reserved one'],
      ['https://[::1]/hook', 'webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); ::1 resolves to a private, loopback or reserved one'],
      ['https://10.1.2.3/hook', 'webhookUrl must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); 10.1.2.3 resolves to a private, loopback or reserved one'],
      ['https://user:pw@93.184.216.34/hook', 'webhookUrl must not contain credentials'],
      ['not a url', 'webhookUrl must be an absolute URL such as https://example.com/hooks/agent'],
      ['ftp://93.184.216.34/', 'webhookUrl must use https://'],
    ]) {
      await expect(runCommand(strict, ['webhooks', 'set', name, url!])).rejects.toThrow(error!);
    }
    expect(await runCommand(strict, ['webhooks', 'set', name, 'https://93.184.216.34/hooks/x?y=1'])).toMatchObject({
      webhookUrl: 'https://93.184.216.34/hooks/x?y=1',
    });
  });

  test('threads confirm-close and decline-close', async () => {
    const a = await h.agent(uniqueName('cli'));
    const b = await h.agent(uniqueName('cli'));
    const id = await h.thread(a, [b]);
    await expect(run('threads', 'confirm-close', id)).rejects.toThrow('The thread has no pending close request (it is open).');
    await h.call('POST', `/api/threads/${id}/close`, { key: a.key });
    expect(await run('threads', 'decline-close', id)).toEqual({ id, state: 'open' });
    await h.call('POST', `/api/threads/${id}/close`, { key: a.key });
    expect(await run('threads', 'confirm-close', id)).toEqual({ id, state: 'closed' });
    await expect(run('threads', 'confirm-close', 'bogus')).rejects.toThrow('No such thread.');
  });

  test('deliveries resend refuses a delivery that has not failed', async () => {
    const a = await h.agent(uniqueName('cli'));
    const b = await h.agent(uniqueName('cli'));
    const id = await h.thread(a, [b]);
    const posted = await h.post(a, id);
    const [d] = await h.db.sql`select id from deliveries where message_id = ${posted.id}`;
    await expect(run('deliveries', 'resend', d!.id)).rejects.toThrow('Only a failed delivery can be resent; this one is accepted.');
    await expect(run('deliveries', 'resend', 'nope')).rejects.toThrow('No such delivery.');
  });

  test('usage errors name the right form', async () => {
    await expect(run('agents', 'create')).rejects.toThrow('Usage: agents create <username> [--webhook <url>]');
    await expect(run('agents', 'create', 'x', '--webhook')).rejects.toThrow('--webhook needs a value.');
    await expect(run('agents', 'create', 'x', '--color', 'red')).rejects.toThrow('Unknown option --color.');
    await expect(run('agents', 'create', 'Not Valid')).rejects.toThrow(
      'username must be lowercase letters, digits, ".", "_" or "-", starting with a letter or digit',
    );
    await expect(run('frobnicate')).rejects.toThrow('Unknown command "frobnicate".');
  });
});

describe('the CLI as a process', () => {
  test('prints JSON and exits 0, or a sentence on stderr and exits 1', async () => {
    const name = uniqueName('proc');
    const env = { ...process.env, DATABASE_URL: h.db.url };
    const ok = Bun.spawnSync(['bun', 'src/main.ts', 'agents', 'create', name], { env });
    expect(ok.exitCode).toBe(0);
    expect(JSON.parse(ok.stdout.toString())).toEqual({ username: name, apiKey: expect.stringMatching(/^agt_/) });
    const bad = Bun.spawnSync(['bun', 'src/main.ts', 'agents', 'create', name], { env });
    expect(bad.exitCode).toBe(1);
    expect(bad.stdout.toString()).toBe('');
    expect(bad.stderr.toString().trim()).toBe(`An agent named ${name} already exists.`);
  });
});
