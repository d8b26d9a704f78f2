import { afterAll, beforeAll, expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { invitePerson } from '../src/domain/people/people';
import { testDatabase, type TestDatabase } from '../test/support/database';
import { pkcePair } from '../test/support/oauth';
import { freePort } from '../test/support/ports';
import { eventually, receiver } from '../test/support/receiver';
import { sign } from '../test/support/webhooks';
import { call, startService, type Service } from './support/service';
import { BY_CLI } from '../src/domain/people/audit';

// A full scenario against the real server with everything logged (debug level), then a search of
// its whole log for every secret that passed through: agent keys, signing secrets, the session
// token, message bodies, and a guessed key. The one documented exception is the sign-in code,
// written to the log as a `sign_in_code` line when no SMTP server is configured.
let db: TestDatabase;
let server: Service;
beforeAll(async () => {
  db = await testDatabase();
  server = await startService({ DATABASE_URL: db.url, LOG_LEVEL: 'debug' });
}, 60_000);
afterAll(async () => {
  await server?.stop();
  await db?.drop();
});

let secret = '';
const verified: boolean[] = [];
const hook = receiver((req) => {
  verified.push(req.headers.get('x-signature-256') === sign(req.raw, secret));
  return new Response('ok');
});

const dashboard = (method: string, path: string, cookie: string, body?: unknown) =>
  call(server.base, method, `/dashboard/api${path}`, { body, headers: { cookie, 'x-requested-with': 'fetch' } });

const mcp = (key: string, name: string, args: Record<string, unknown>) =>
  call(server.base, 'POST', '/mcp', {
    key,
    body: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } },
    headers: { accept: 'application/json, text/event-stream' },
  });

test('keys, secrets, session tokens and bodies never reach the log; strangers get 404', async () => {
  // A person signs in with the code from the log (no SMTP configured).
  await invitePerson(db.sql, BY_CLI, { email: 'keeper@example.com', username: 'keeper' });
  expect((await call(server.base, 'POST', '/dashboard/api/sign-in/code', { body: { email: 'keeper@example.com' }, headers: { 'x-requested-with': 'fetch' } })).status).toBe(200);
  const code = String((await eventually(async () => server.lines.find((l) => l.event === 'sign_in_code')))!.code);
  const wrong = code === '000000' ? '000001' : '000000';
  expect((await call(server.base, 'POST', '/dashboard/api/sign-in/verify', { body: { email: 'keeper@example.com', code: wrong }, headers: { 'x-requested-with': 'fetch' } })).status).toBe(400);
  const signIn = await fetch(`${server.base}/dashboard/api/sign-in/verify`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-requested-with': 'fetch' },
    body: JSON.stringify({ email: 'keeper@example.com', code }),
  });
  expect(signIn.status).toBe(200);
  const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
  const token = cookie.split('=')[1]!;

  // Agents registered on the dashboard: keys and the signing secret are shown there, once or on demand.
  const writer = (await dashboard('POST', '/agents', cookie, { username: 'writer' })).body.data;
  const reader = (await dashboard('POST', '/agents', cookie, { username: 'reader', webhookUrl: hook.url() })).body.data;
  const stranger = (await dashboard('POST', '/agents', cookie, { username: 'stranger' })).body.data;
  secret = reader.signingSecret;
  expect((await dashboard('GET', '/agents/reader/webhook/secret', cookie)).body.data).toMatchObject({ signingSecret: secret });

  // Messages whose bodies must stay out of the log, one posted by the person.
  const bodies = [`first line ${randomBytes(8).toString('hex')}\nmore ${randomBytes(8).toString('hex')}`, `private ${randomBytes(8).toString('hex')}`];
  const thread = (await call(server.base, 'POST', '/api/threads', { key: writer.apiKey, body: { title: 'Secrets', participantUsernames: ['reader'] } })).body.data;
  const first = (await call(server.base, 'POST', `/api/threads/${thread.id}/messages`, { key: writer.apiKey, body: { content: bodies[0], summary: 'a summary' } })).body.data;
  expect((await dashboard('POST', `/threads/${thread.id}/messages`, cookie, { content: bodies[1] })).status).toBe(201);
  await eventually(async () => verified.length === 2);
  expect(verified).toEqual([true, true]);

  // The reader reads over MCP and the HTTP API.
  const read = await mcp(reader.apiKey, 'read_message', { messageId: first.id });
  expect(read.status).toBe(200);
  expect(read.body.result.content[0].text).toContain(bodies[0]!.split('\n')[0]);
  const inbox = await call(server.base, 'GET', '/api/deliveries', { key: reader.apiKey });
  expect(inbox.body.data).toHaveLength(2);
  const listed = await call(server.base, 'GET', `/api/threads/${thread.id}/messages`, { key: reader.apiKey });
  expect(listed.body.data.map((m: { content: string }) => m.content)).toEqual(bodies);

  // A stranger learns nothing: 404 wherever the thread, its messages or its deliveries are named.
  const deliveryId = inbox.body.data[0].deliveryId;
  const asStranger = [
    ['GET', `/api/threads/${thread.id}`],
    ['GET', `/api/threads/${thread.id}/messages`],
    ['POST', `/api/threads/${thread.id}/messages`, { content: 'let me in' }],
    ['POST', `/api/threads/${thread.id}/participants`, { username: 'stranger' }],
    ['POST', `/api/threads/${thread.id}/close`],
    ['POST', `/api/deliveries/${deliveryId}/delivered`],
    ['POST', `/api/deliveries/${deliveryId}/acknowledge`],
  ] as const;
  for (const [method, path, body] of asStranger) {
    const res = await call(server.base, method, path, { key: stranger.apiKey, body });
    expect({ path, status: res.status, success: res.body.success }).toEqual({ path, status: 404, success: false });
  }
  const peek = await mcp(stranger.apiKey, 'read_message', { messageId: first.id });
  expect(peek.body.result).toMatchObject({ isError: true, content: [{ text: 'No such message, or you are not a participant of its thread.' }] });
  // The writer is a participant but not the reader: acknowledging the reader's delivery is a 404 too.
  expect((await call(server.base, 'POST', `/api/deliveries/${deliveryId}/acknowledge`, { key: writer.apiKey })).status).toBe(404);

  // Wrong credentials, including a well-formed guess, are refused and not written down.
  const guess = `agt_${randomBytes(32).toString('base64url')}`;
  for (const auth of [`Bearer ${guess}`, `Bearer ${writer.apiKey}x`, `Basic ${Buffer.from(`writer:${writer.apiKey}`).toString('base64')}`]) {
    expect((await call(server.base, 'GET', '/api/threads', { headers: { authorization: auth } })).status).toBe(401);
  }
  expect((await call(server.base, 'GET', '/dashboard/api/agents', { key: writer.apiKey })).status).toBe(401);
  expect((await dashboard('POST', '/sign-out', cookie)).status).toBe(200);
  expect((await dashboard('GET', '/me', cookie)).status).toBe(401);

  expect(await server.stop()).toBe(0);
  const log = server.raw();
  expect(log.length).toBeGreaterThan(1_000);
  const secrets = {
    writerKey: writer.apiKey,
    readerKey: reader.apiKey,
    strangerKey: stranger.apiKey,
    signingSecret: secret,
    sessionToken: token,
    guessedKey: guess,
    ...Object.fromEntries(bodies.flatMap((b, i) => b.split('\n').map((line, j) => [`body${i}.${j}`, line]))),
  };
  const leaked = Object.entries(secrets).filter(([, value]) => log.includes(value));
  expect(leaked.map(([name]) => name)).toEqual([]);
  // The code appears only in its own documented line, and only because SMTP_URL is unset.
  const withCode = server.lines.filter((l) => Object.values(l).includes(code));
  expect(withCode.map((l) => l.event)).toEqual(['sign_in_code']);
  expect(log.split(`"${code}"`)).toHaveLength(2);
  expect(log).not.toContain(`"${wrong}"`);
}, 60_000);

// OAuth for MCP clients against a server process that names its own address as PUBLIC_URL: every
// code and token of a whole flow (registration, consent, exchange, use, refresh, revocation) is
// looked for in the debug log afterwards, and every line the process printed must be a log line
// (oidc-provider's own warnings included).
test('OAuth codes and tokens never reach the log; nothing but JSON lines is printed', async () => {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const oauthServer = await startService({ DATABASE_URL: db.url, LOG_LEVEL: 'debug', PUBLIC_URL: base }, { port });
  try {
    const cookies = new Map<string, string>();
    const keep = (res: Response) => {
      for (const line of res.headers.getSetCookie()) {
        const [pair] = line.split(';');
        const at = pair!.indexOf('=');
        cookies.set(pair!.slice(0, at), pair!.slice(at + 1));
      }
      return res;
    };
    const jar = () => [...cookies].map(([n, v]) => `${n}=${v}`).join('; ');
    const go = async (url: string, init: RequestInit = {}) =>
      keep(await fetch(new URL(url, base), { ...init, redirect: 'manual', headers: { cookie: jar(), ...(init.headers as Record<string, string>) } }));
    const form = (fields: Record<string, string>) => ({
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });

    await invitePerson(db.sql, BY_CLI, { email: 'oauth-keeper@example.com', username: 'oauth-keeper' });
    await call(base, 'POST', '/dashboard/api/sign-in/code', { body: { email: 'oauth-keeper@example.com' }, headers: { 'x-requested-with': 'fetch' } });
    const code = String((await eventually(async () => oauthServer.lines.find((l) => l.event === 'sign_in_code')))!.code);
    await go('/dashboard/api/sign-in/verify', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-requested-with': 'fetch' },
      body: JSON.stringify({ email: 'oauth-keeper@example.com', code }),
    });
    const sessionToken = cookies.get('ams_session')!;
    await call(base, 'POST', '/dashboard/api/agents', { body: { username: 'oauth-agent' }, headers: { cookie: jar(), 'x-requested-with': 'fetch' } });

    const redirectUri = 'https://client.example/callback';
    const registered = await (await go('/oauth/register', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: [redirectUri], token_endpoint_auth_method: 'none', client_name: 'Leak Check', scope: 'mcp' }),
    })).json() as any;
    const pkce = pkcePair();
    const query = new URLSearchParams({
      response_type: 'code', client_id: registered.client_id, redirect_uri: redirectUri, code_challenge: pkce.challenge,
      code_challenge_method: 'S256', state: 'leak-check', scope: 'mcp', resource: `${base}/mcp`,
    });
    const consentAt = (await go(`/oauth/authorize?${query}`)).headers.get('location')!;
    const decided = await (await go(`${consentAt}/decision`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-requested-with': 'fetch' },
      body: JSON.stringify({ decision: 'approve', agent: 'oauth-agent' }),
    })).json() as any;
    const back = new URL((await go(decided.data.redirectTo)).headers.get('location')!);
    const authorizationCode = back.searchParams.get('code')!;
    const tokens = await (await go('/oauth/token', form({
      grant_type: 'authorization_code', code: authorizationCode, redirect_uri: redirectUri, client_id: registered.client_id,
      code_verifier: pkce.verifier, resource: `${base}/mcp`,
    }))).json() as any;
    expect((await mcpAs(base, tokens.access_token)).status).toBe(200);
    const refreshed = await (await go('/oauth/token', form({
      grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: registered.client_id, resource: `${base}/mcp`,
    }))).json() as any;
    expect((await mcpAs(base, refreshed.access_token)).status).toBe(200);
    // A refused token and the revocation of the grant.
    expect((await mcpAs(base, `${refreshed.access_token}x`)).status).toBe(401);
    expect((await go('/oauth/revoke', form({ token: refreshed.refresh_token, client_id: registered.client_id }))).status).toBe(200);
    expect((await mcpAs(base, refreshed.access_token)).status).toBe(401);

    expect(await oauthServer.stop()).toBe(0);
    const log = oauthServer.raw();
    const secrets = {
      sessionToken,
      authorizationServerSession: cookies.get('_session') ?? '',
      registrationAccessToken: registered.registration_access_token,
      authorizationCode,
      codeVerifier: pkce.verifier,
      accessToken: tokens.access_token,
      refreshToken: tokens.refresh_token,
      rotatedAccessToken: refreshed.access_token,
      rotatedRefreshToken: refreshed.refresh_token,
    };
    expect(Object.values(secrets).every((value) => value.length >= 20)).toBe(true);
    const leaked = Object.entries(secrets).filter(([, value]) => log.includes(value));
    expect(leaked.map(([name]) => name)).toEqual([]);
    expect(oauthServer.lines.filter((l) => l.event === 'unparsed')).toEqual([]);
    // The library's warning at import (Bun is not a Node.js LTS) is there, as a structured line.
    expect(oauthServer.lines.find((l) => l.event === 'oauth_library_notice')).toMatchObject({ level: 'debug', text: expect.stringContaining('Unsupported runtime') });
    expect(oauthServer.lines.find((l) => l.event === 'oauth_client_connected')).toMatchObject({ agent: 'oauth-agent', person: 'oauth-keeper' });
  } finally {
    await oauthServer.stop();
  }
}, 60_000);

const mcpAs = (base: string, accessToken: string) =>
  call(base, 'POST', '/mcp', {
    key: accessToken,
    body: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    headers: { accept: 'application/json, text/event-stream' },
  });
