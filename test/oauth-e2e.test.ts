import { afterAll, beforeAll, expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InvalidGrantError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { invitePerson } from '../src/domain/people/people';
import { axeViolations, pageWidths, useDashboardBrowser } from './support/dashboard-browser';
import { localCertificates } from './support/tls';
import { BY_CLI } from '../src/domain/people/audit';

// An MCP host signing in as one of our agents, end to end: the official MCP SDK client with its OAuth
// support discovers the server from a 401, registers itself, and sends the person's browser (real
// headless Chromium) to authorize; the person signs in, picks an agent and approves; the SDK
// exchanges the code and calls tools as that agent; disconnecting the client on the dashboard cuts
// it off. The server listens on the address PUBLIC_URL names, as in a deployment.
// WEBHOOK_ALLOW_LOCAL lets the service fetch the second host's metadata document from this machine.
const b = useDashboardBrowser({ WEBHOOK_ALLOW_LOCAL: 'true' }, { width: 1100, height: 800 }, { oauth: true });
const { h } = b;

// What a host keeps between runs: its registration, its tokens, the verifier of the flow under way.
class HostStorage implements OAuthClientProvider {
  info?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier = '';
  authorizationUrls: URL[] = [];
  readonly expectedState = randomBytes(8).toString('hex');
  constructor(readonly callbackUrl: string) {}
  get redirectUrl() {
    return this.callbackUrl;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'E2E Host',
      redirect_uris: [this.callbackUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state = () => this.expectedState;
  clientInformation = () => this.info;
  saveClientInformation = (info: OAuthClientInformationMixed) => void (this.info = info);
  tokens = () => this.saved;
  saveTokens = (tokens: OAuthTokens) => void (this.saved = tokens);
  redirectToAuthorization = (url: URL) => void this.authorizationUrls.push(url);
  saveCodeVerifier = (verifier: string) => void (this.verifier = verifier);
  codeVerifier = () => this.verifier;
}

// The host's redirect target: a request to /callback is the browser coming back. The browser also
// asks for /favicon.ico, whenever it likes; taken for the way back, it would end a flow with no code.
let callback: ReturnType<typeof Bun.serve>;
let returned = Promise.withResolvers<URL>();
beforeAll(() => {
  callback = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch(request) {
      const url = new URL(request.url);
      if (url.pathname !== '/callback') return new Response(null, { status: 404 });
      returned.resolve(url);
      return new Response('Connected. You can close this page.');
    },
  });
});
afterAll(() => callback?.stop(true));

const loggedCode = (email: string) => b.logLines.findLast((l) => l.event === 'sign_in_code' && l.email === email)?.code as string | undefined;

test('an MCP SDK client signs in through the browser, acts as the chosen agent, and is cut off when disconnected', async () => {
  const { page, base } = b;
  await invitePerson(h.db.sql, BY_CLI, { email: 'grace@example.com', username: 'grace' });
  const agent = await h.agent('hosted-agent');
  await h.agent('other-agent');
  const sender = await h.agent('e2e-sender');
  const threadId = await h.thread(sender, [agent], 'For the hosted agent');
  const { id: messageId } = await h.post(sender, threadId, 'hello from the sender');

  const storage = new HostStorage(`http://127.0.0.1:${callback.port}/callback`);
  const mcpUrl = new URL('/mcp', base);
  const first = new Client({ name: 'e2e-host', version: '1.0.0' });
  // No credential yet: the SDK reads the 401's resource metadata, registers, and asks for the browser.
  await expect(first.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: storage }))).rejects.toBeInstanceOf(UnauthorizedError);
  expect(storage.authorizationUrls).toHaveLength(1);
  const authorizationUrl = storage.authorizationUrls[0]!;
  expect(authorizationUrl.origin + authorizationUrl.pathname).toBe(`${base}/oauth/authorize`);
  expect(authorizationUrl.searchParams.get('code_challenge_method')).toBe('S256');
  expect(authorizationUrl.searchParams.get('resource')).toBe(`${base}/mcp`);
  expect(storage.info?.client_id).toEqual(expect.any(String));

  // The person's browser: not signed in, so the dashboard asks first, then comes back to the request.
  await page.goto(authorizationUrl.href);
  await page.waitForURL(/\/dashboard\/sign-in\?next=%2Fdashboard%2Fauthorize%2F/);
  await page.getByLabel('Email', { exact: true }).fill('grace@example.com');
  const before = loggedCode('grace@example.com');
  await page.getByRole('button', { name: 'Send me a code' }).click();
  await page.getByLabel('Code from the email').waitFor();
  while (loggedCode('grace@example.com') === before) await Bun.sleep(20);
  await page.getByLabel('Code from the email').fill(loggedCode('grace@example.com')!);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/dashboard\/authorize\/[^/]+$/);
  await page.getByText('E2E Host').first().waitFor();
  await b.screenshot('oauth-consent-e2e');
  await page.getByRole('radio', { name: 'hosted-agent' }).check();
  await page.getByRole('button', { name: 'Approve' }).click();
  const back = await returned.promise;
  // The callback server has the request before the browser has finished arriving there: leaving
  // the page earlier would be interrupted by that navigation.
  await page.waitForURL(/\/callback\?/);
  expect(back.searchParams.get('state')).toBe(storage.expectedState);
  expect(back.searchParams.get('iss')).toBe(base);
  const code = back.searchParams.get('code')!;

  const signedIn = new StreamableHTTPClientTransport(mcpUrl, { authProvider: storage });
  await signedIn.finishAuth(code);
  expect(storage.saved).toMatchObject({ token_type: 'Bearer', scope: 'mcp' });
  const client = new Client({ name: 'e2e-host', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: storage }));
  const inbox = (await client.callTool({ name: 'check_inbox', arguments: {} })) as unknown as { structuredContent: { entries: { messageId: string }[] } };
  expect(inbox.structuredContent.entries.map((e) => e.messageId)).toEqual([messageId]);
  // It speaks as that agent: its reply is from hosted-agent.
  const replied = (await client.callTool({ name: 'send_message', arguments: { threadId, content: 'hello back' } })) as { isError?: boolean };
  expect(replied.isError).toBeUndefined();
  const [reply] = await h.db.sql`select sender from messages where thread_id = ${threadId} order by id desc limit 1`;
  expect(reply!.sender).toBe('hosted-agent');

  // The person disconnects it on the Agents page: the next call is refused with 401, and the
  // refresh token the SDK then tries is dead too (invalid_grant).
  await page.goto(`${base}/dashboard/agents`);
  const card = page.locator('[data-agent="hosted-agent"]');
  await card.getByRole('button', { name: /^Manage/ }).click();
  await card.getByText('E2E Host').waitFor();
  await card.getByRole('button', { name: 'Disconnect' }).click();
  // The page's own dialog says what disconnecting does, and asks.
  const dialog = page.getByRole('dialog', { name: 'Disconnect E2E Host from hosted-agent?' });
  expect(await dialog.locator('p').allTextContents()).toEqual([
    'E2E Host can no longer act as hosted-agent: its next call is refused, and its refresh token stops working.',
    'Connecting it again takes a new approval on the consent page.',
  ]);
  await dialog.getByRole('button', { name: 'Disconnect' }).click();
  await card.getByText('E2E Host').waitFor({ state: 'detached' });
  await expect(client.callTool({ name: 'check_inbox', arguments: {} })).rejects.toBeInstanceOf(InvalidGrantError);
  const n = (await h.db.sql<{ n: number }[]>`select count(*)::int as n from oauth_connections`)[0]!.n;
  expect(n).toBe(0);
  await client.close();
}, 60_000);

// A host that names itself by the https address of its metadata document instead of registering
// (the MCP specification's preferred way): the SDK sees client_id_metadata_document_supported and
// sends that address as its client_id; the service fetches the document from the host's server.
class DocumentHost extends HostStorage {
  constructor(callbackUrl: string, readonly clientMetadataUrl: string) {
    super(callbackUrl);
  }
}

test('an MCP SDK client named by its metadata document connects without registering', async () => {
  const { page, base } = b;
  const agent = await h.agent('document-agent');
  const callbackUrl = `http://127.0.0.1:${callback.port}/callback`;
  let documentUrl = '';
  const hostServer = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    tls: localCertificates(),
    fetch: () =>
      Response.json(
        { client_id: documentUrl, client_name: 'Document Host', client_uri: 'https://host.example', redirect_uris: [callbackUrl], token_endpoint_auth_method: 'none' },
        { headers: { 'cache-control': 'max-age=600' } },
      ),
  });
  documentUrl = `https://localhost:${hostServer.port}/oauth/client-metadata.json`;
  try {
    returned = Promise.withResolvers<URL>();
    const storage = new DocumentHost(callbackUrl, documentUrl);
    const mcpUrl = new URL('/mcp', base);
    await expect(new Client({ name: 'doc-host', version: '1.0.0' }).connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: storage }))).rejects.toBeInstanceOf(
      UnauthorizedError,
    );
    const authorizationUrl = storage.authorizationUrls[0]!;
    expect(authorizationUrl.searchParams.get('client_id')).toBe(documentUrl);
    expect(storage.info?.client_id).toBe(documentUrl);
    const registrations = await h.db.sql`select count(*)::int as n from oauth_artifacts where model = 'Client' and payload->>'client_id' = ${documentUrl}`;
    expect(registrations[0]!.n).toBe(0);

    // The person is still signed in from the test before: straight to the request.
    await page.goto(authorizationUrl.href);
    await page.waitForURL(/\/dashboard\/authorize\/[^/]+$/);
    await page.getByRole('heading', { name: 'Connect Document Host' }).waitFor();
    await page.getByText(`localhost:${hostServer.port}`, { exact: true }).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await b.screenshot('oauth-consent-metadata-document');
    // The document's address is long and unbroken: at phone width it wraps inside the page.
    await page.setViewportSize({ width: 390, height: 844 });
    const [content, window] = await pageWidths(page);
    expect(content).toBe(window);
    await b.screenshot('oauth-consent-metadata-document-phone');
    await page.setViewportSize({ width: 1100, height: 800 });
    await page.getByRole('radio', { name: 'document-agent' }).check();
    await page.getByRole('button', { name: 'Approve' }).click();
    const back = await returned.promise;
    await page.waitForURL(/\/callback\?/);
    await new StreamableHTTPClientTransport(mcpUrl, { authProvider: storage }).finishAuth(back.searchParams.get('code')!);
    const client = new Client({ name: 'doc-host', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: storage }));
    const sent = (await client.callTool({ name: 'list_threads', arguments: {} })) as { isError?: boolean };
    expect(sent.isError).toBeUndefined();
    await client.close();

    await page.goto(`${base}/dashboard/agents`);
    const card = page.locator(`[data-agent="${agent.username}"]`);
    await card.getByRole('button', { name: /^Manage/ }).click();
    await card.getByText('Document Host').waitFor();
    await b.screenshot('agents-connected-metadata-document');
  } finally {
    hostServer.stop(true);
  }
}, 60_000);
