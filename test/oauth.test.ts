import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createHash } from 'node:crypto';
import { loadConfig } from '../src/config';
import { buildApp } from '../src/app';
import { createLogger } from '../src/log';
import { createMetrics } from '../src/metrics';
import { EXPIRED_REQUEST } from '../src/oauth/consent';
import { createOAuthServer } from '../src/oauth/provider';
import { NO_OAUTH } from '../src/mcp/routes';
import { useDashboardHarness } from './support/dashboard';
import { callApp, useHarness } from './support/harness';
import { oauthClient } from './support/oauth';
import { eventually } from './support/receiver';

// OAuth 2.1 for MCP clients, through app.handle(): discovery, registration, the authorization
// code flow with PKCE, a person's decision on the dashboard, tokens bound to /mcp, and every way
// a token stops working. test/oauth-e2e.test.ts runs the same flow with the MCP SDK's client and a
// real browser.
const PUBLIC = 'https://ams.example.com';
const h = useDashboardHarness({ PUBLIC_URL: PUBLIC });
const o = oauthClient(h, PUBLIC);
const CHALLENGE = `Bearer realm="agent-messaging-service", resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource/mcp", scope="mcp"`;

const sha256 = (text: string) => createHash('sha256').update(text).digest();

let people = 0;
async function personSession() {
  const email = `person${++people}@example.com`;
  await h.invite(email, `person-${people}`);
  return { session: await h.signIn(email), username: `person-${people}` };
}

// The agent's inbox as the token sees it (check_inbox over MCP).
async function inboxVia(accessToken: string) {
  const res = await o.mcp(accessToken, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'check_inbox', arguments: {} } });
  return res;
}

const agentListed = async (session: string, username: string) => {
  const res = await h.send('GET', `/dashboard/api/agents?q=${username}`, { cookie: session });
  return res.body.data.items.find((a: { username: string }) => a.username === username);
};

describe('discovery', () => {
  test('the protected resource names /mcp and its authorization server, at both well-known addresses', async () => {
    for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
      const res = await h.send('GET', path);
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.body).toEqual({
        resource: `${PUBLIC}/mcp`,
        authorization_servers: [PUBLIC],
        scopes_supported: ['mcp'],
        bearer_methods_supported: ['header'],
        resource_name: 'Agent Messaging Service',
      });
    }
  });

  test('the authorization server metadata (RFC 8414, also at the OpenID discovery address) says exactly what is offered', async () => {
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      const res = await h.send('GET', path);
      expect(res.status).toBe(200);
      // Answered by the library, before routing, and still named like every other answer.
      expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      expect(res.headers.get('content-type')).toStartWith('application/json');
      // No ID tokens, claims, signing keys, logout, pushed requests or DPoP: none is offered.
      expect(res.body).toEqual({
        issuer: PUBLIC,
        authorization_endpoint: `${PUBLIC}/oauth/authorize`,
        token_endpoint: `${PUBLIC}/oauth/token`,
        registration_endpoint: `${PUBLIC}/oauth/register`,
        revocation_endpoint: `${PUBLIC}/oauth/revoke`,
        scopes_supported: ['mcp'],
        response_types_supported: ['code'],
        response_modes_supported: ['form_post', 'fragment', 'query'],
        grant_types_supported: ['authorization_code', 'refresh_token'],
        token_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
        revocation_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
        code_challenge_methods_supported: ['S256'],
        authorization_response_iss_parameter_supported: true,
        client_id_metadata_document_supported: true,
      });
    }
  });

  test("the library's endpoints for what is not offered are not served: logout, pushed requests, userinfo", async () => {
    for (const [method, path] of [['GET', '/oauth/session/end'], ['POST', '/oauth/session/end'], ['POST', '/oauth/par'], ['GET', '/oauth/me']] as const) {
      const res = await callApp(h.dash, method, path, method === 'POST' ? o.form({ client_id: 'any' }) : {});
      expect([method, path, res.status]).toEqual([method, path, 404]);
    }
  });

  test('a 401 from /mcp points to the resource metadata, and says invalid_token when a token was sent', async () => {
    const bare = await callApp(h.dash, 'POST', '/mcp', { body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toBe(CHALLENGE);
    expect(bare.body).toEqual({ success: false, error: 'Authorization header is missing; send "Authorization: Bearer agt_…".' });
    const wrong = await o.mcp('not-a-token-we-issued-0123456789');
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toBe(`${CHALLENGE}, error="invalid_token"`);
    expect(wrong.body).toEqual({
      success: false,
      error: 'The access token is not recognised, has expired, was revoked, or is not for this resource.',
    });
  });
});

describe('the authorization code flow', () => {
  test('register, authorize, a person approves for an agent, exchange: the token acts as that agent on /mcp', async () => {
    const { session, username } = await personSession();
    const alice = await h.agent('flow-alice');
    const bob = await h.agent('flow-bob');
    const threadId = await h.thread(bob, [alice], 'For alice');
    const { id: messageId } = await h.post(bob, threadId, 'hello alice');

    const client = await o.register('https://client.example/callback', { client_name: 'Claude', client_uri: 'https://claude.example' });
    const flow = await o.authorize(client);
    expect(flow.res.status).toBe(303);
    expect(flow.uid).not.toBeNull();
    const asked = await h.send('GET', `/dashboard/authorize/${flow.uid}/request`, { cookie: flow.jar.header(session) });
    expect(asked.status).toBe(200);
    expect(asked.body.data).toEqual({
      uid: flow.uid,
      client: { clientId: client.clientId, name: 'Claude', uri: 'https://claude.example', redirectUri: 'https://client.example/callback', metadataDocument: false },
      resource: `${PUBLIC}/mcp`,
      agents: expect.arrayContaining(['flow-alice', 'flow-bob']),
    });

    const { decision, callback } = await o.decide(flow, session, { decision: 'approve', agent: 'flow-alice' });
    expect(decision.status).toBe(200);
    expect(callback!.origin + callback!.pathname).toBe('https://client.example/callback');
    expect(callback!.searchParams.get('state')).toBe(flow.state);
    expect(callback!.searchParams.get('iss')).toBe(PUBLIC);
    const code = callback!.searchParams.get('code')!;
    expect(h.logLines.findLast((l) => l.event === 'oauth_client_connected')).toMatchObject({
      level: 'info',
      clientId: client.clientId,
      agent: 'flow-alice',
      person: username,
      requestId: expect.any(String),
    });

    const tokens = await o.exchange(client, code, flow.pkce.verifier);
    expect(tokens.status).toBe(200);
    expect(tokens.body).toEqual({
      access_token: expect.any(String),
      refresh_token: expect.any(String),
      expires_in: 3600,
      scope: 'mcp',
      token_type: 'Bearer',
    });
    const { access_token: accessToken, refresh_token: refreshToken } = tokens.body;

    const inbox = await inboxVia(accessToken);
    expect(inbox.status).toBe(200);
    expect(inbox.body.result.structuredContent.entries.map((e: { messageId: string }) => e.messageId)).toEqual([messageId]);

    // Nothing a client presents is stored as itself: codes and tokens are kept by their hash.
    for (const credential of [code, accessToken, refreshToken]) {
      const n = (await h.db.sql<{ n: number }[]>`select count(*)::int as n from oauth_artifacts where position(${credential} in payload::text) > 0`)[0]!.n;
      expect(n).toBe(0);
    }
    const [stored] = await h.db.sql`select model from oauth_artifacts where id_hash = ${sha256(accessToken)}`;
    expect(stored!.model).toBe('AccessToken');

    // The Agents page lists the connection, who approved it, and when it was last used.
    const listed = await agentListed(session, 'flow-alice');
    expect(listed.connections).toEqual([
      {
        grantId: expect.any(String),
        clientId: client.clientId,
        clientName: 'Claude',
        clientUri: 'https://claude.example',
        approvedBy: username,
        approvedAt: expect.any(String),
        lastUsedAt: expect.any(String),
      },
    ]);

    // A code works once; presented again, it also revokes what it was exchanged for (RFC 6749 4.1.2).
    const again = await o.exchange(client, code, flow.pkce.verifier);
    expect(again.status).toBe(400);
    expect(again.body.error).toBe('invalid_grant');
    expect((await inboxVia(accessToken)).status).toBe(401);
  });

  test('the token is for /mcp only: the HTTP API refuses it', async () => {
    const { session } = await personSession();
    await h.agent('api-agent');
    const { accessToken } = await o.connect(session, 'api-agent');
    const res = await callApp(h.dash, 'GET', '/api/deliveries', { headers: { authorization: `Bearer ${accessToken}` } });
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ success: false, error: 'The API key is malformed: an agent key is agt_ and 43 more letters, digits, - or _; check that it was copied whole.' });
  });

  test('a person picks the agent at every authorization, in the same browser too', async () => {
    const { session } = await personSession();
    const first = await h.agent('pick-first');
    const second = await h.agent('pick-second');
    const sender = await h.agent('pick-sender');
    const toSecond = await h.post(sender, await h.thread(sender, [second]), 'for the second');
    const client = await o.register();
    const flow = await o.authorize(client);
    const { callback } = await o.decide(flow, session, { decision: 'approve', agent: first.username });
    expect(callback!.searchParams.get('code')).not.toBeNull();
    // The same browser (its cookies kept), a second client: asked again, approved for another agent.
    const other = await o.register('https://other.example/cb');
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: other.clientId,
      redirect_uri: other.redirectUri,
      code_challenge: flow.pkce.challenge,
      code_challenge_method: 'S256',
      state: 'second',
      scope: 'mcp',
      resource: o.resource,
    });
    const res = await callApp(h.dash, 'GET', `/oauth/authorize?${query}`, { headers: { cookie: flow.jar.header() } });
    flow.jar.absorb(res);
    expect(res.status).toBe(303);
    const uid = res.headers.get('location')!.split('/').at(-1)!;
    const secondFlow = { ...flow, uid, state: 'second' };
    const decided = await o.decide(secondFlow, session, { decision: 'approve', agent: second.username });
    const tokens = await o.exchange(other, decided.callback!.searchParams.get('code')!, flow.pkce.verifier);
    const inbox = await inboxVia(tokens.body.access_token);
    expect(inbox.body.result.structuredContent.entries.map((e: { messageId: string }) => e.messageId)).toEqual([toSecond.id]);
  });
});

describe('clients with a secret', () => {
  test('client_secret_post and client_secret_basic: the code is exchanged only with the secret', async () => {
    const { session } = await personSession();
    await h.agent('secret-agent');
    for (const method of ['client_secret_post', 'client_secret_basic']) {
      const client = await o.register('https://confidential.example/callback', { token_endpoint_auth_method: method });
      const flow = await o.authorize(client);
      const { callback } = await o.decide(flow, session, { decision: 'approve', agent: 'secret-agent' });
      const code = callback!.searchParams.get('code')!;
      const fields = {
        grant_type: 'authorization_code',
        code,
        redirect_uri: client.redirectUri,
        client_id: client.clientId,
        code_verifier: flow.pkce.verifier,
        resource: o.resource,
      };
      const withoutSecret = await o.token(fields);
      expect([method, withoutSecret.status, withoutSecret.body.error]).toEqual([method, 401, 'invalid_client']);
      const secret = client.secret!;
      const tokens =
        method === 'client_secret_post'
          ? await o.token({ ...fields, client_secret: secret })
          : await callApp(h.dash, 'POST', '/oauth/token', {
              raw: new URLSearchParams(fields).toString(),
              headers: {
                'content-type': 'application/x-www-form-urlencoded',
                authorization: `Basic ${btoa(`${encodeURIComponent(client.clientId)}:${encodeURIComponent(secret)}`)}`,
              },
            });
      expect([method, tokens.status, tokens.body.token_type, tokens.body.scope]).toEqual([method, 200, 'Bearer', 'mcp']);
      expect((await inboxVia(tokens.body.access_token)).status).toBe(200);
    }
  });
});

describe('registrations', () => {
  test('a registration nobody connects expires after a day; connecting the client keeps it', async () => {
    const { session } = await personSession();
    await h.agent('kept-agent');
    const expiry = async (clientId: string) =>
      (await h.db.sql<{ left: number | null }[]>`
        select extract(epoch from expires_at - now())::int as left from oauth_artifacts
        where model = 'Client' and id_hash = ${sha256(clientId)}`)[0]!.left;
    const idle = await o.register();
    const left = await expiry(idle.clientId);
    expect(left).toBeGreaterThan(86_400 - 60);
    expect(left).toBeLessThanOrEqual(86_400);
    const { client } = await o.connect(session, 'kept-agent');
    expect(await expiry(client.clientId)).toBeNull();
  });
});

describe('what the authorization server refuses', () => {
  test('more than 20 registrations an hour from one address: 429 in the OAuth error form, other addresses unaffected', async () => {
    for (let i = 0; i < 20; i++) await o.register(undefined, {}, '198.51.100.77');
    const refused = await callApp(h.dash, 'POST', '/oauth/register', {
      headers: { 'x-forwarded-for': '198.51.100.77' },
      body: { redirect_uris: ['https://client.example/callback'], token_endpoint_auth_method: 'none' },
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('3600');
    expect(refused.body).toEqual({
      error: 'temporarily_unavailable',
      error_description: 'Too many client registrations from this address (at most 20 an hour); try again later.',
    });
    expect((await o.register(undefined, {}, '198.51.100.78')).clientId).toEqual(expect.any(String));
    const n = (await h.db.sql<{ n: number }[]>`select count(*)::int as n from oauth_registration_attempts where client = '198.51.100.77'`)[0]!.n;
    expect(n).toBe(20);
  });

  test('no PKCE, or PKCE with the plain method: back to the client with invalid_request', async () => {
    const client = await o.register();
    for (const params of [{ code_challenge: null, code_challenge_method: null }, { code_challenge_method: 'plain' }] as Record<string, string | null>[]) {
      const flow = await o.authorize(client, params);
      expect(flow.res.status).toBe(303);
      const back = new URL(flow.location!);
      expect(back.origin + back.pathname).toBe(client.redirectUri);
      expect(back.searchParams.get('error')).toBe('invalid_request');
      expect(back.searchParams.get('state')).toBe(flow.state);
    }
  });

  test('a wrong code verifier gets no token', async () => {
    const { session } = await personSession();
    await h.agent('verifier-agent');
    const client = await o.register();
    const flow = await o.authorize(client);
    const { callback } = await o.decide(flow, session, { decision: 'approve', agent: 'verifier-agent' });
    const res = await o.exchange(client, callback!.searchParams.get('code')!, `${flow.pkce.verifier}x`);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('invalid_grant');
  });

  test('a redirect URI that is not exactly the registered one is refused without redirecting', async () => {
    const client = await o.register('https://client.example/callback');
    for (const redirect of ['https://client.example/callback/', 'https://client.example/callback?x=1', 'https://evil.example/callback']) {
      const flow = await o.authorize(client, { redirect_uri: redirect });
      expect(flow.res.status).toBe(400);
      expect(flow.location).toBeNull();
      // A page for the person whose browser it is, in the dashboard's look and under its policy.
      expect(flow.res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(flow.res.headers.get('content-security-policy')).toStartWith("default-src 'none'");
      expect(flow.res.body).toContain('<h1>This connection cannot go on</h1>');
      expect(flow.res.body).toContain('(error <code>invalid_redirect_uri</code>)');
    }
  });

  test('a resource other than this /mcp: invalid_target', async () => {
    const client = await o.register();
    const flow = await o.authorize(client, { resource: 'https://other.example/mcp' });
    const back = new URL(flow.location!);
    expect(back.searchParams.get('error')).toBe('invalid_target');
  });

  test('a code presented with another resource is refused, and cannot be presented again: the client starts over', async () => {
    const { session } = await personSession();
    await h.agent('target-agent');
    const client = await o.register();
    const flow = await o.authorize(client);
    const { callback } = await o.decide(flow, session, { decision: 'approve', agent: 'target-agent' });
    const code = callback!.searchParams.get('code')!;
    const fields = { grant_type: 'authorization_code', code, redirect_uri: client.redirectUri, client_id: client.clientId, code_verifier: flow.pkce.verifier };
    const wrong = await o.token({ ...fields, resource: 'https://other.example/mcp' });
    expect([wrong.status, wrong.body.error]).toEqual([400, 'invalid_target']);
    const retried = await o.exchange(client, code, flow.pkce.verifier);
    expect([retried.status, retried.body.error]).toEqual([400, 'invalid_grant']);
    const { callback: again } = await o.decide(await o.authorize(client), session, { decision: 'approve', agent: 'target-agent' });
    expect(again!.searchParams.get('code')).not.toBeNull();
  });

  test('client authentication by JWT is not offered: such a registration is refused', async () => {
    const jwks = { keys: [{ kty: 'EC', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0' }] };
    for (const method of ['private_key_jwt', 'client_secret_jwt']) {
      const res = await callApp(h.dash, 'POST', '/oauth/register', {
        headers: { 'x-forwarded-for': '198.51.100.20' },
        body: { redirect_uris: ['https://client.example/callback'], token_endpoint_auth_method: method, jwks },
      });
      expect([method, res.status, res.body.error]).toEqual([method, 400, 'invalid_client_metadata']);
      expect(res.body.error_description).toContain('token_endpoint_auth_method');
    }
  });

  test('a DPoP proof is not taken: the token is a bearer token, as /mcp checks it', async () => {
    const { session } = await personSession();
    await h.agent('dpop-agent');
    const client = await o.register();
    const flow = await o.authorize(client);
    const { callback } = await o.decide(flow, session, { decision: 'approve', agent: 'dpop-agent' });
    const res = await callApp(h.dash, 'POST', '/oauth/token', {
      raw: new URLSearchParams({
        grant_type: 'authorization_code',
        code: callback!.searchParams.get('code')!,
        redirect_uri: client.redirectUri,
        client_id: client.clientId,
        code_verifier: flow.pkce.verifier,
        resource: o.resource,
      }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: 'not-a-proof' },
    });
    expect([res.status, res.body.token_type]).toEqual([200, 'Bearer']);
  });
});

describe('a token stops working', () => {
  // Real HTTP for the GET streams below.
  beforeAll(() => h.app.listen({ port: 0, hostname: '127.0.0.1' }));
  afterAll(() => h.app.stop(true));

  test('when its audience is not this /mcp, or it has expired: 401 with the challenge', async () => {
    const { session } = await personSession();
    await h.agent('aud-agent');
    for (const spoil of [
      (hash: Buffer) => h.db.sql`update oauth_artifacts set payload = payload || '{"aud":"https://other.example/mcp"}' where id_hash = ${hash}`,
      (hash: Buffer) => h.db.sql`update oauth_artifacts set expires_at = now() - interval '1 second' where id_hash = ${hash}`,
    ]) {
      const { accessToken } = await o.connect(session, 'aud-agent');
      expect((await inboxVia(accessToken)).status).toBe(200);
      await spoil(sha256(accessToken));
      const res = await inboxVia(accessToken);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe(`${CHALLENGE}, error="invalid_token"`);
    }
  });

  test('refresh tokens rotate; a rotated one used again ends the whole grant', async () => {
    const { session } = await personSession();
    await h.agent('refresh-agent');
    const { client, refreshToken } = await o.connect(session, 'refresh-agent');
    const refreshed = await o.token({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.clientId, resource: o.resource });
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.refresh_token).not.toBe(refreshToken);
    expect((await inboxVia(refreshed.body.access_token)).status).toBe(200);

    const replayed = await o.token({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.clientId, resource: o.resource });
    expect(replayed.status).toBe(400);
    expect(replayed.body.error).toBe('invalid_grant');
    expect((await inboxVia(refreshed.body.access_token)).status).toBe(401);
    expect((await agentListed(session, 'refresh-agent')).connections).toEqual([]);
  });

  test('when a person disconnects the client on the dashboard: at once, with everything issued under it', async () => {
    const { session } = await personSession();
    await h.agent('disconnect-agent');
    const { client, accessToken, refreshToken } = await o.connect(session, 'disconnect-agent');
    const grantId = ((await agentListed(session, 'disconnect-agent')).connections as { grantId: string }[])[0]!.grantId;
    const res = await h.send('DELETE', `/dashboard/api/connections/${grantId}`, { cookie: session });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, data: { grantId, revoked: true } });
    expect(h.logLines.findLast((l) => l.event === 'oauth_client_disconnected')).toMatchObject({ grantId, person: expect.any(String) });
    expect((await inboxVia(accessToken)).status).toBe(401);
    const n = (await h.db.sql<{ n: number }[]>`select count(*)::int as n from oauth_artifacts where grant_id = ${grantId}`)[0]!.n;
    expect(n).toBe(0);
    const refreshed = await o.token({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.clientId, resource: o.resource });
    expect(refreshed.body.error).toBe('invalid_grant');
    const again = await h.send('DELETE', `/dashboard/api/connections/${grantId}`, { cookie: session });
    expect(again.status).toBe(404);
    expect(again.body).toEqual({ success: false, error: 'No such connected client; it may have been disconnected already.', code: 'not_found' });
  });

  test('a GET stream opened with a token ends when the person disconnects the client, and when the token expires', async () => {
    const { session } = await personSession();
    await h.agent('stream-token-agent');
    // The MCP GET stream as a client holds it, over real HTTP, reading until it ends.
    const openStream = async (accessToken: string) => {
      const res = await fetch(`http://127.0.0.1:${h.app.server!.port}/mcp`, {
        headers: { authorization: `Bearer ${accessToken}`, accept: 'text/event-stream' },
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      const ended = (async () => {
        for (;;) if ((await reader.read()).done) return true;
      })();
      return { ended };
    };
    const streams = h.inboxSignal.streaming();
    const first = await o.connect(session, 'stream-token-agent');
    const disconnected = (await openStream(first.accessToken)).ended;
    await eventually(async () => h.inboxSignal.streaming() === streams + 1);
    const grantId = ((await agentListed(session, 'stream-token-agent')).connections as { grantId: string }[])[0]!.grantId;
    expect((await h.send('DELETE', `/dashboard/api/connections/${grantId}`, { cookie: session })).status).toBe(200);
    expect(await disconnected).toBe(true);
    await eventually(async () => h.inboxSignal.streaming() === streams);

    // A token about to expire: its stream ends a moment after, with no change to hear of.
    const second = await o.connect(session, 'stream-token-agent');
    await h.db.sql`update oauth_artifacts set expires_at = now() + interval '1 second' where id_hash = ${sha256(second.accessToken)}`;
    const expired = (await openStream(second.accessToken)).ended;
    await eventually(async () => h.inboxSignal.streaming() === streams + 1);
    expect(await expired).toBe(true);
    await eventually(async () => h.inboxSignal.streaming() === streams);
  });

  test('when the agent is archived: at once, and unarchiving does not bring it back', async () => {
    const { session } = await personSession();
    await h.agent('archived-agent');
    const { accessToken } = await o.connect(session, 'archived-agent');
    expect((await inboxVia(accessToken)).status).toBe(200);
    expect((await h.send('POST', '/dashboard/api/agents/archived-agent/archive', { cookie: session })).status).toBe(200);
    expect((await inboxVia(accessToken)).status).toBe(401);
    expect((await h.send('POST', '/dashboard/api/agents/archived-agent/unarchive', { cookie: session })).status).toBe(200);
    expect((await inboxVia(accessToken)).status).toBe(401);
    expect((await agentListed(session, 'archived-agent')).connections).toEqual([]);
  });

  test('when the client signs its grant out at the revocation endpoint', async () => {
    const { session } = await personSession();
    await h.agent('revoked-agent');
    const { client, accessToken, refreshToken } = await o.connect(session, 'revoked-agent');
    const res = await callApp(h.dash, 'POST', '/oauth/revoke', o.form({ token: refreshToken, client_id: client.clientId }));
    expect(res.status).toBe(200);
    expect((await inboxVia(accessToken)).status).toBe(401);
    expect((await agentListed(session, 'revoked-agent')).connections).toEqual([]);
  });
});

describe('the consent routes', () => {
  test('need a session, the dashboard header and this site, and the browser that started the request', async () => {
    const { session } = await personSession();
    await h.agent('consent-agent');
    const client = await o.register();
    const flow = await o.authorize(client);
    const requestPath = `/dashboard/authorize/${flow.uid}/request`;
    const decisionPath = `/dashboard/authorize/${flow.uid}/decision`;
    const approve = { decision: 'approve', agent: 'consent-agent' };

    const noSession = await h.send('GET', requestPath, { cookie: flow.jar.header() });
    expect(noSession.status).toBe(401);
    expect(noSession.body).toEqual({ success: false, error: 'Sign in first: there is no session, or it has expired.', code: 'no_session' });
    const noHeader = await h.send('POST', decisionPath, { cookie: flow.jar.header(session), body: approve, csrf: false });
    expect(noHeader.status).toBe(403);
    const crossSite = await h.send('POST', decisionPath, {
      cookie: flow.jar.header(session),
      body: approve,
      headers: { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
    });
    expect(crossSite.status).toBe(403);
    expect(crossSite.body).toEqual({ success: false, error: 'Cross-site request refused: the request did not come from this dashboard.', code: 'cross_site' });
    const agentKey = await callApp(h.dash, 'GET', requestPath, { headers: { authorization: `Bearer agt_${'a'.repeat(43)}` } });
    expect(agentKey.status).toBe(401);
    // Another browser, signed in, without the request's cookie: it cannot see or decide it.
    for (const [method, path] of [['GET', requestPath], ['POST', decisionPath]] as const) {
      const elsewhere = await h.send(method, path, { cookie: session, body: method === 'POST' ? approve : undefined });
      expect(elsewhere.status).toBe(404);
      expect(elsewhere.body).toEqual({ success: false, error: EXPIRED_REQUEST, code: 'not_found' });
    }
    // Nothing was connected by any of it.
    const n = (await h.db.sql<{ n: number }[]>`select count(*)::int as n from oauth_connections where client_id = ${client.clientId}`)[0]!.n;
    expect(n).toBe(0);
  });

  test('a decision must name an active agent; a refusal changes nothing and the request can still be decided', async () => {
    const { session } = await personSession();
    await h.agent('gone-agent');
    await h.send('POST', '/dashboard/api/agents/gone-agent/archive', { cookie: session });
    const client = await o.register();
    const flow = await o.authorize(client);
    const decide = (body: unknown) => h.send('POST', `/dashboard/authorize/${flow.uid}/decision`, { cookie: flow.jar.header(session), body });
    for (const [body, error, field] of [
      [{ decision: 'approve' }, 'agent: choose the agent the client will act as.', 'agent'],
      [{ decision: 'approve', agent: 'nobody' }, 'agent: no active agent named nobody.', 'agent'],
      [{ decision: 'approve', agent: 'gone-agent' }, 'agent: no active agent named gone-agent.', 'agent'],
      [{ decision: 'maybe' }, 'decision: must be "approve" or "deny".', 'decision'],
    ] as const) {
      const res = await decide(body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ success: false, error, code: 'invalid', field });
    }
    const n = (await h.db.sql<{ n: number }[]>`select count(*)::int as n from oauth_artifacts where model = 'Grant' and payload->>'clientId' = ${client.clientId}`)[0]!.n;
    expect(n).toBe(0);
    const denied = await o.decide(flow, session, { decision: 'deny' });
    expect(denied.callback!.searchParams.get('error')).toBe('access_denied');
    expect(denied.callback!.searchParams.get('state')).toBe(flow.state);
    expect(denied.callback!.searchParams.get('code')).toBeNull();
    const c = (await h.db.sql<{ c: number }[]>`select count(*)::int as c from oauth_connections where client_id = ${client.clientId}`)[0]!.c;
    expect(c).toBe(0);
  });
});

describe('metrics', () => {
  test('OAuth answers are counted by endpoint, never by a client id or a request uid', async () => {
    const metrics = createMetrics();
    const app = buildApp({ sql: h.db.sql, config: h.config, log: createLogger('error'), inboxSignal: h.inboxSignal, agentCache: h.agentCache, oauth: h.service.oauth, metrics });
    const from = { 'x-forwarded-for': '192.0.2.10' };
    const registered = await callApp(app, 'POST', '/oauth/register', {
      headers: from,
      body: { redirect_uris: ['https://client.example/callback'], token_endpoint_auth_method: 'none', client_name: 'Counted' },
    });
    expect(registered.status).toBe(201);
    const clientId = registered.body.client_id as string;
    expect((await callApp(app, 'GET', `/oauth/register/${clientId}`, { headers: { authorization: `Bearer ${registered.body.registration_access_token}` } })).status).toBe(200);
    expect((await callApp(app, 'GET', '/.well-known/oauth-authorization-server')).status).toBe(200);
    expect((await callApp(app, 'GET', '/.well-known/oauth-protected-resource/mcp')).status).toBe(200);
    expect((await callApp(app, 'GET', `/oauth/authorize/${clientId}/x`)).status).toBe(404);
    const counted = (series: string) => metrics.render().then((text) => text.includes(`ams_http_request_duration_seconds_count{${series}} 1`));
    const expected = [
      'method="POST",route="/oauth/register",status="201"',
      'method="GET",route="/oauth/register/:id",status="200"',
      'method="GET",route="/.well-known/oauth-authorization-server",status="200"',
      'method="GET",route="/.well-known/oauth-protected-resource/mcp",status="200"',
      'method="GET",route="unmatched",status="404"',
    ];
    for (const series of expected) expect([series, await counted(series)]).toEqual([series, true]);
    expect((await metrics.render()).includes(clientId)).toBe(false);
  });
});

describe('a PUBLIC_URL with a path', () => {
  test('offers no OAuth, and says why in the log', async () => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
    expect(await createOAuthServer(h.db.sql, loadConfig({ DATABASE_URL: h.db.url, PUBLIC_URL: 'https://example.com/ams' }), log)).toBeNull();
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        event: 'oauth_not_offered',
        reason: 'PUBLIC_URL has a path; OAuth sign-in needs the service at the root of its address.',
      }),
    ]);
  });
});

describe('without PUBLIC_URL', () => {
  const plain = useHarness();
  test('no OAuth is offered: no metadata, the plain challenge, and registration says to send the agent key', async () => {
    expect((await plain.call('GET', '/.well-known/oauth-protected-resource/mcp')).status).toBe(404);
    expect((await plain.call('GET', '/.well-known/oauth-authorization-server')).status).toBe(404);
    const res = await plain.call('POST', '/mcp', { body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="agent-messaging-service"');
    const register = await plain.call('POST', '/register', { body: {} });
    expect(register.status).toBe(404);
    expect(register.body).toEqual({ success: false, error: NO_OAUTH });
  });
});
