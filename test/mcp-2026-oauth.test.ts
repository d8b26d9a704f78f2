import { afterAll, beforeAll, expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import {
  Client,
  StreamableHTTPClientTransport,
  UnauthorizedError,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  type OAuthClientMetadata,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
} from '@modelcontextprotocol/client';
import { createLogger } from '../src/log';
import { invitePerson } from '../src/domain/people/people';
import { BY_CLI } from '../src/domain/people/audit';
import { useHarness } from './support/harness';
import { cookieJar } from './support/oauth';
import { freePort } from './support/ports';

// An MCP 2026-07-28 host signing in as one of our agents with the SDK's v2 client and its OAuth
// support, as test/oauth-e2e.test.ts does with the v1 client: discovery from the 401, registration,
// a person's approval, the code exchanged, tools called and inbox updates heard with the token,
// and the token cut off when the person disconnects the client. The person's browser is played
// with fetch (the consent page itself is tested in a browser there). The server listens on the
// address PUBLIC_URL names, as in a deployment.
const env: Record<string, string> = {};
// Runs before the harness's own beforeAll, which reads the environment when it starts.
beforeAll(async () => {
  env.PUBLIC_URL = `http://127.0.0.1:${await freePort()}`;
});
const lines: Record<string, unknown>[] = [];
const h = useHarness(env, { log: createLogger('info', (line) => lines.push(JSON.parse(line))) });
let base: string;
beforeAll(() => {
  base = env.PUBLIC_URL!;
  h.app.listen({ hostname: '127.0.0.1', port: Number(new URL(base).port) });
});
afterAll(() => h.app.stop(true));

const CALLBACK = 'http://127.0.0.1:9/callback';

// What a host keeps between runs: its registration, its tokens, the verifier of the flow under way.
class HostStorage implements OAuthClientProvider {
  info?: StoredOAuthClientInformation;
  saved?: StoredOAuthTokens;
  discovered?: OAuthDiscoveryState;
  verifier = '';
  authorizationUrls: URL[] = [];
  readonly expectedState = randomBytes(8).toString('hex');
  get redirectUrl() {
    return CALLBACK;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'V2 Host',
      redirect_uris: [CALLBACK],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state = () => this.expectedState;
  clientInformation = () => this.info;
  saveClientInformation = (info: StoredOAuthClientInformation) => void (this.info = info);
  tokens = () => this.saved;
  saveTokens = (tokens: StoredOAuthTokens) => void (this.saved = tokens);
  redirectToAuthorization = (url: URL) => void this.authorizationUrls.push(url);
  saveCodeVerifier = (verifier: string) => void (this.verifier = verifier);
  codeVerifier = () => this.verifier;
  saveDiscoveryState = (state: OAuthDiscoveryState) => void (this.discovered = state);
  discoveryState = () => this.discovered;
}

const pinned = () => new Client({ name: 'v2-host', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });

// A person signed in on the dashboard: its session cookie.
async function personSession(email: string) {
  await invitePerson(h.db.sql, BY_CLI, { email, username: email.split('@')[0]! });
  const post = (path: string, body: unknown) =>
    fetch(`${base}/dashboard/api/sign-in/${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-requested-with': 'fetch' }, body: JSON.stringify(body) });
  await post('code', { email });
  const code = lines.findLast((l) => l.event === 'sign_in_code' && l.email === email)?.code;
  const verified = await post('verify', { email, code });
  expect(verified.status).toBe(200);
  return verified.headers.getSetCookie()[0]!.split(';')[0]!;
}

// The person's browser: the authorization request, the person's approval for `agent`, and the
// redirects back to the host's callback, whose address it answers.
async function approve(authorizationUrl: URL, session: string, agent: string): Promise<URL> {
  const jar = cookieJar();
  const started = await fetch(authorizationUrl, { redirect: 'manual' });
  jar.absorb(started);
  const uid = started.headers.get('location')!.match(/^\/dashboard\/authorize\/([^/?]+)$/)![1];
  const decided = await fetch(`${base}/dashboard/authorize/${uid}/decision`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-requested-with': 'fetch', cookie: jar.header(session) },
    body: JSON.stringify({ decision: 'approve', agent }),
  });
  expect(decided.status).toBe(200);
  let next = new URL(((await decided.json()) as { data: { redirectTo: string } }).data.redirectTo, base);
  while (next.origin === base) {
    const res = await fetch(next, { redirect: 'manual', headers: { cookie: jar.header() } });
    jar.absorb(res);
    next = new URL(res.headers.get('location')!, base);
  }
  return next;
}

test('a 2026-07-28 host signs in with OAuth, calls tools and listens as the chosen agent, and is cut off when disconnected', async () => {
  const session = await personSession('hopper@example.com');
  const agent = await h.agent('hosted-v2');
  const sender = await h.agent('v2-sender');
  const threadId = await h.thread(sender, [agent], 'For the hosted agent');
  const { id: messageId } = await h.post(sender, threadId, 'hello from the sender');

  const storage = new HostStorage();
  const mcpUrl = new URL('/mcp', base);
  // No credential yet: the SDK reads the 401's resource metadata, registers, and asks for the browser.
  await expect(pinned().connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: storage }))).rejects.toBeInstanceOf(UnauthorizedError);
  expect(storage.authorizationUrls).toHaveLength(1);
  const authorizationUrl = storage.authorizationUrls[0]!;
  expect(authorizationUrl.origin + authorizationUrl.pathname).toBe(`${base}/oauth/authorize`);
  expect(authorizationUrl.searchParams.get('resource')).toBe(`${base}/mcp`);

  const back = await approve(authorizationUrl, session, agent.username);
  expect(back.origin + back.pathname).toBe(CALLBACK);
  expect(back.searchParams.get('state')).toBe(storage.expectedState);
  await new StreamableHTTPClientTransport(mcpUrl, { authProvider: storage }).finishAuth(back.searchParams);
  expect(storage.saved).toMatchObject({ token_type: 'Bearer', scope: 'mcp' });

  const client = pinned();
  await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: storage }));
  expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
  const inbox = (await client.callTool({ name: 'check_inbox', arguments: {} })) as { structuredContent: { entries: { messageId: string }[] } };
  expect(inbox.structuredContent.entries.map((e) => e.messageId)).toEqual([messageId]);
  const replied = (await client.callTool({ name: 'send_message', arguments: { threadId, content: 'hello back' } })) as { isError?: boolean };
  expect(replied.isError).toBeUndefined();
  const [reply] = await h.db.sql`select sender from messages where thread_id = ${threadId} order by id desc limit 1`;
  expect(reply!.sender).toBe('hosted-v2');

  // Its subscription ends when the person disconnects the client; its next call is refused.
  const subscription = await client.listen({ resourceSubscriptions: ['ams://inbox'] });
  const [grant] = await h.db.sql<{ grant_id: string }[]>`select grant_id from oauth_connections`;
  const disconnected = await fetch(`${base}/dashboard/api/connections/${grant!.grant_id}`, { method: 'DELETE', headers: { cookie: session, 'x-requested-with': 'fetch' } });
  expect(disconnected.status).toBe(200);
  expect(await subscription.closed).toBe('graceful');
  // The call is refused with 401, and the refresh token the SDK then tries is dead too.
  await expect(client.callTool({ name: 'check_inbox', arguments: {} })).rejects.toMatchObject({ code: 'invalid_grant' });
  const refused = await fetch(mcpUrl, {
    method: 'POST',
    headers: { authorization: `Bearer ${storage.saved!.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } }),
  });
  expect(refused.status).toBe(401);
  await client.close();
}, 30_000);
