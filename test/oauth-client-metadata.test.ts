import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Config } from '../src/config';
import { buildApp } from '../src/app';
import { createLogger } from '../src/log';
import { createOAuthServer } from '../src/oauth/provider';
import { useDashboardHarness } from './support/dashboard';
import { callApp, uniqueName } from './support/harness';
import { oauthClient, pkcePair } from './support/oauth';
import { localCertificates } from './support/tls';

// Clients named by the https address of their metadata document (OAuth Client ID Metadata
// Documents, the MCP specification's preferred registration, 2025-11-25): no registration, the
// document fetched from the client's own server (here a local https server whose certificate this
// process trusts) under the same address rules as a webhook.
const PUBLIC = 'https://ams.example.com';
const h = useDashboardHarness({ PUBLIC_URL: PUBLIC, WEBHOOK_ALLOW_LOCAL: 'true' });
const o = oauthClient(h, PUBLIC);

// The client's server: documents by path, and how often each was fetched.
const documents = new Map<string, () => Response>();
const fetched = new Map<string, number>();
let clientServer: ReturnType<typeof Bun.serve>;
beforeAll(() => {
  clientServer = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    tls: localCertificates(),
    fetch(request) {
      const path = new URL(request.url).pathname;
      fetched.set(path, (fetched.get(path) ?? 0) + 1);
      return documents.get(path)?.() ?? new Response('not here', { status: 404 });
    },
  });
});
afterAll(() => clientServer?.stop(true));

const addressOf = (path: string) => `https://localhost:${clientServer.port}${path}`;
const REDIRECT = 'https://host.example/oauth/callback';
function publish(path: string, document: Record<string, unknown>, headers: Record<string, string> = {}) {
  const clientId = addressOf(path);
  const body = JSON.stringify({ client_id: clientId, ...document });
  documents.set(path, () => new Response(body, { headers: { 'content-type': 'application/json', ...headers } }));
  return clientId;
}
const hostDocument = {
  client_name: 'Document Host',
  client_uri: 'https://host.example',
  redirect_uris: [REDIRECT],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
};

let people = 0;
async function personSession() {
  const email = `doc-person${++people}@example.com`;
  await h.invite(email, `doc-person-${people}`);
  return h.signIn(email);
}

describe('a client named by its metadata document', () => {
  test('is offered in the metadata, connects without registering, and acts as the chosen agent', async () => {
    const metadata = await callApp(h.dash, 'GET', '/.well-known/oauth-authorization-server');
    expect(metadata.body.client_id_metadata_document_supported).toBe(true);

    const clientId = publish('/host/client.json', hostDocument, { 'cache-control': 'max-age=300' });
    const agent = await h.agent(uniqueName('doc-agent'));
    const session = await personSession();
    const flow = await o.authorize({ clientId, redirectUri: REDIRECT });
    expect(flow.res.status).toBe(303);
    expect(flow.uid).toEqual(expect.any(String));

    const asked = await h.send('GET', `/dashboard/authorize/${flow.uid}/request`, { cookie: flow.jar.header(session) });
    expect(asked.status).toBe(200);
    expect(asked.body.data.client).toEqual({
      clientId,
      name: 'Document Host',
      uri: 'https://host.example',
      redirectUri: REDIRECT,
      metadataDocument: true,
    });

    const { callback } = await o.decide(flow, session, { decision: 'approve', agent: agent.username });
    expect(`${callback!.origin}${callback!.pathname}`).toBe(REDIRECT);
    const tokens = await o.exchange({ clientId, redirectUri: REDIRECT }, callback!.searchParams.get('code')!, flow.pkce.verifier);
    expect(tokens.status).toBe(200);
    const whoami = await o.mcp(tokens.body.access_token, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'check_inbox', arguments: {} } });
    expect([whoami.status, whoami.body.result.isError ?? false]).toEqual([200, false]);

    // Kept by its address for as long as its Cache-Control allows: one fetch for the whole flow.
    expect(fetched.get('/host/client.json')).toBe(1);
    // Nothing registered; the connection keeps the name the person saw.
    const [stored] = await h.db.sql`select count(*)::int as n from oauth_artifacts where model = 'Client' and payload->>'client_id' = ${clientId}`;
    expect(stored!.n).toBe(0);
    const listed = await h.send('GET', `/dashboard/api/agents?q=${agent.username}`, { cookie: session });
    const connections = listed.body.data.items.find((a: { username: string }) => a.username === agent.username).connections;
    expect(connections).toEqual([
      expect.objectContaining({ clientId, clientName: 'Document Host', clientUri: 'https://host.example', lastUsedAt: expect.any(String) }),
    ]);
  });

  test('its redirect URI must be one its document lists, exactly', async () => {
    const clientId = publish('/host/strict.json', hostDocument);
    const flow = await o.authorize({ clientId, redirectUri: `${REDIRECT}/elsewhere` });
    expect([flow.res.status, flow.location]).toEqual([400, null]);
    expect(String(flow.res.body)).toContain("<p class=\"error\">redirect_uri did not match any of the client's registered redirect_uris.</p>");
  });
});

describe('a metadata document that does not hold up', () => {
  // An authorization server of its own, so that its log can be read.
  async function authorizationServer(overrides: Partial<Config> = {}) {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('debug', (line) => lines.push(JSON.parse(line)));
    const config = { ...h.config, ...overrides };
    const oauth = await createOAuthServer(h.db.sql, config, log);
    const app = buildApp({ sql: h.db.sql, config, log, inboxSignal: h.inboxSignal, agentCache: h.agentCache, oauth });
    const authorize = async (clientId: string, from = '192.0.2.50') => {
      const query = new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: REDIRECT,
        code_challenge: pkcePair().challenge,
        code_challenge_method: 'S256',
        state: 'x',
        scope: 'mcp',
        resource: `${PUBLIC}/mcp`,
      });
      return callApp(app, 'GET', `/oauth/authorize?${query}`, { headers: { 'x-forwarded-for': from } });
    };
    return { lines, authorize };
  }

  test('is refused on the error page, never back to a redirect URI, and the log says why', async () => {
    const server = await authorizationServer();
    // The sentence the person sees, the reason the log gives, and how often the client's server
    // was asked. The library looks a refused client up twice (the second time to decide where its
    // error may go); a fetch that failed is remembered, so its server is asked once (and one that
    // hangs costs one 2.5 s wait, not two); a document that came but does not hold up is fetched
    // again.
    const cases: [string, (path: string) => void, string, string, number][] = [
      ['missing', () => {}, 'client_id metadata document fetch failed', 'unexpected response status 404', 1],
      [
        'another-id',
        (path) => publish(path, { ...hostDocument, client_id: 'https://someone.else/client.json' }),
        'client_id metadata document client_id does not match the expected value',
        'client_id metadata document client_id does not match the expected value',
        2,
      ],
      [
        'with-secret',
        (path) => publish(path, { ...hostDocument, client_secret: 'shh' }),
        'client_id metadata document must not contain client_secret or client_secret_expires_at',
        'client_id metadata document must not contain client_secret or client_secret_expires_at',
        2,
      ],
      [
        'shared-secret-auth',
        (path) => publish(path, { ...hostDocument, token_endpoint_auth_method: 'client_secret_basic' }),
        'client_id metadata document must not use shared-secret token endpoint authentication methods',
        'client_id metadata document must not use shared-secret token endpoint authentication methods',
        2,
      ],
      ['too-large', (path) => publish(path, { ...hostDocument, client_name: 'x'.repeat(6_000) }), 'client_id metadata document fetch failed', 'the answer is larger than 5120 bytes', 1],
      [
        'redirected',
        (path) => documents.set(path, () => Response.redirect(addressOf('/host/client.json'), 302)),
        'client_id metadata document fetch failed',
        'unexpected response status 302',
        1,
      ],
      [
        'hanging',
        (path) => documents.set(path, () => new Response(new ReadableStream({ pull: () => Bun.sleep(10_000) }), { headers: { 'content-type': 'application/json' } })),
        'client_id metadata document fetch failed',
        'no answer in time (timed out)',
        1,
      ],
      ['not-json', (path) => documents.set(path, () => new Response('<html>hello</html>')), 'client_id metadata document fetch failed', "JSON Parse error: Unrecognized token '<'", 2],
    ];
    for (const [i, [name, prepare, sentence, reason, asked]] of cases.entries()) {
      const path = `/bad/${name}.json`;
      prepare(path);
      const res = await server.authorize(addressOf(path), `192.0.2.${60 + i}`);
      expect([name, res.status, res.headers.get('location'), res.headers.get('content-type')]).toEqual([name, 400, null, 'text/html; charset=utf-8']);
      expect([name, String(res.body).match(/<p class="error">([^<]*)<\/p>/)?.[1]]).toEqual([name, `${sentence}.`]);
      expect(server.lines).toContainEqual(expect.objectContaining({ event: 'oauth_client_metadata_refused', url: addressOf(path), reason }));
      expect([name, fetched.get(path)]).toEqual([name, asked]);
    }
  }, 15_000);

  test('fetching documents not yet known counts against the per-address limit on registration', async () => {
    const server = await authorizationServer();
    for (let i = 0; i < 20; i++) await o.register(undefined, {}, '192.0.2.99');
    const clientId = publish('/host/limited.json', hostDocument);
    const res = await server.authorize(clientId, '192.0.2.99');
    expect([res.status, res.headers.get('location')]).toEqual([400, null]);
    expect(String(res.body).match(/<p class="error">([^<]*)<\/p>/)?.[1]).toBe('client_id metadata document fetch not allowed.');
    expect(fetched.get('/host/limited.json')).toBeUndefined();
    // Another address fetches it; once known, the limited address is served it from the cache.
    expect((await server.authorize(clientId, '192.0.2.100')).status).toBe(303);
    expect((await server.authorize(clientId, '192.0.2.99')).status).toBe(303);
    expect(fetched.get('/host/limited.json')).toBe(1);
    // A refused document costs one slot, though the library looks the client up twice: the second
    // look-up only repeats the remembered failure.
    expect((await server.authorize(addressOf('/host/nowhere.json'), '192.0.2.120')).status).toBe(400);
    const [taken] = await h.db.sql`select count(*)::int as n from oauth_registration_attempts where client = '192.0.2.120'`;
    expect(taken!.n).toBe(1);
  });

  test('on a private or loopback address, unless WEBHOOK_ALLOW_LOCAL, is not even fetched', async () => {
    const server = await authorizationServer({ WEBHOOK_ALLOW_LOCAL: false });
    const path = '/host/private.json';
    const clientId = publish(path, hostDocument);
    const res = await server.authorize(clientId);
    expect([res.status, res.headers.get('location')]).toEqual([400, null]);
    expect(fetched.get(path)).toBeUndefined();
    expect(server.lines).toContainEqual(
      expect.objectContaining({
        event: 'oauth_client_metadata_refused',
        url: clientId,
        reason: 'the client metadata address must point to a public address unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook); localhost resolves to a private, loopback or reserved one',
      }),
    );
  });
});
