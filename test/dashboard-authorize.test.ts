import { afterAll, beforeAll, expect, test } from 'bun:test';
import { pkcePair } from './support/oauth';
import { axeViolations, pageWidths, useDashboardBrowser, type PageGlobals } from './support/dashboard-browser';

// The dashboard's half of OAuth in a real Chromium: the consent page an MCP client sends a person
// to (what it shows, what it refuses, where it leads), and the connected clients on the Agents
// page. Screenshots at desktop and phone widths go to test-artifacts/dashboard (docs/screenshots
// with UPDATE_SCREENSHOTS=1). The SDK-driven flow is test/oauth-e2e.test.ts.
const b = useDashboardBrowser({}, { width: 1100, height: 800 }, { oauth: true });
const { h } = b;

// The client's redirect target: records where each authorization came back to.
let target: ReturnType<typeof Bun.serve>;
const returns: URL[] = [];
beforeAll(() => {
  target = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch(request) {
      const url = new URL(request.url);
      // The browser asks for a favicon too.
      if (url.pathname === '/callback') returns.push(url);
      return new Response('back at the client');
    },
  });
});
afterAll(() => target?.stop(true));

async function docsShot(name: string) {
  await b.screenshot(name);
  if (process.env.UPDATE_SCREENSHOTS === '1') await b.page.screenshot({ path: `docs/screenshots/${name}.png`, fullPage: true });
}

// A registered client and a fresh authorization request for it, as an MCP host opens one.
async function startAuthorization(clientName: string) {
  const redirectUri = `http://127.0.0.1:${target.port}/callback`;
  const registered = await fetch(`${b.base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: clientName, redirect_uris: [redirectUri], token_endpoint_auth_method: 'none', scope: 'mcp' }),
  }).then((r) => r.json() as Promise<{ client_id: string }>);
  const state = `state-${returns.length}-${Date.now()}`;
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: registered.client_id,
    redirect_uri: redirectUri,
    code_challenge: pkcePair().challenge,
    code_challenge_method: 'S256',
    state,
    scope: 'mcp',
    resource: `${b.base}/mcp`,
  });
  return { url: `${b.base}/oauth/authorize?${query}`, state, clientId: registered.client_id };
}

// The focused element's id and text, as the page has it.
const focused = () =>
  b.page.evaluate(() => {
    const element = (globalThis as unknown as PageGlobals).document.querySelector(':focus');
    return element ? [element.id, element.textContent] : null;
  });

// The radios in sight, by their agent.
const radiosShown = () => b.page.getByRole('radio').evaluateAll((radios) => radios.map((radio) => (radio as unknown as { value: string }).value));

// The browser arrives at the client, which saw it come back with these parameters.
const cameBack = async (count: number) => {
  await b.page.waitForURL((url) => url.pathname === '/callback');
  while (returns.length < count) await Bun.sleep(20);
  return returns[count - 1]!;
};

test('the consent page: who asks and where it returns, a choice required, approve and deny lead back to the client', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  await h.agent('researcher');
  await h.agent('writer');

  const first = await startAuthorization('Research Assistant');
  await page.goto(first.url);
  await page.waitForURL(/\/dashboard\/authorize\/[^/]+$/);
  await page.getByRole('heading', { name: 'Connect Research Assistant' }).waitFor();
  expect(await page.locator('.return-host').textContent()).toBe(`127.0.0.1:${target.port}`);
  expect(await page.getByRole('radio').count()).toBe(2);
  // Two agents need no search box.
  expect(await page.getByLabel('Find an agent by name').count()).toBe(0);
  expect(await axeViolations(page)).toEqual([]);
  await docsShot('oauth-consent');

  // Approve with no agent chosen: said next to the choice, nothing sent.
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.locator('#agent-error', { hasText: 'Choose the agent the client will act as.' }).waitFor();
  expect(returns).toHaveLength(0);
  await page.getByRole('radio', { name: 'researcher' }).check();
  expect(await page.locator('#agent-error').isVisible()).toBe(false);
  await page.getByRole('button', { name: 'Approve' }).click();
  const approved = await cameBack(1);
  expect(approved.pathname).toBe('/callback');
  expect(approved.searchParams.get('state')).toBe(first.state);
  expect(approved.searchParams.get('code')).toMatch(/^[A-Za-z0-9_-]{20,}$/);

  const second = await startAuthorization('Unwanted Tool');
  await page.goto(second.url);
  await page.getByRole('heading', { name: 'Connect Unwanted Tool' }).waitFor();
  await page.getByRole('button', { name: 'Deny' }).click();
  const denied = await cameBack(2);
  expect(denied.searchParams.get('error')).toBe('access_denied');
  expect(denied.searchParams.get('state')).toBe(second.state);
  expect(denied.searchParams.get('code')).toBeNull();

  // A request already decided (or opened in another browser) says so, in words.
  await page.goBack();
  await page.waitForURL(/\/dashboard\/authorize\/[^/]+$/);
  await page.reload();
  await page.getByText('This authorization request has expired or was started in another browser').waitFor();

  const connected = await h.db.sql`select client_id from oauth_connections`;
  expect(connected.map((c) => c.client_id)).toEqual([first.clientId]);
}, 30_000);

test('an agent just archived cannot be approved: the refusal shows next to the choice', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  await h.agent('short-lived');
  const request = await startAuthorization('Late Client');
  await page.goto(request.url);
  await page.getByRole('radio', { name: 'short-lived' }).check();
  await h.db.sql`update agents set archived_at = now() where username = 'short-lived'`;
  await page.getByRole('button', { name: 'Approve' }).click();
  await page.locator('#agent-error', { hasText: 'no active agent named short-lived.' }).waitFor();
}, 20_000);

test('the Agents page lists connected clients with their last use; Disconnect removes one, once confirmed; phone width fits', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  await page.goto(`${b.base}/dashboard/agents?q=researcher`);
  const card = page.locator('[data-agent="researcher"]');
  // The row counts the clients; their list is beneath it, open for the agent the address names.
  await card.locator('td[data-label="Connected clients"]', { hasText: '1' }).waitFor();
  expect(await card.getByRole('button', { name: /^Manage/ }).getAttribute('aria-expanded')).toBe('true');
  await card.getByText('Research Assistant').waitFor();
  await card.getByText('never used').waitFor();
  await card.getByText('Approved by ada').waitFor();
  expect(await axeViolations(page)).toEqual([]);
  await docsShot('agents-connected-client');

  await page.setViewportSize({ width: 390, height: 844 });
  const request = await startAuthorization('Phone Check');
  await page.goto(request.url);
  await page.getByRole('heading', { name: 'Connect Phone Check' }).waitFor();
  const [content, window] = await pageWidths(page);
  expect(content).toBe(window);
  await docsShot('oauth-consent-phone');
  await page.goto(`${b.base}/dashboard/agents?q=researcher`);
  await card.getByText('Research Assistant').waitFor();
  const [agentsContent, agentsWindow] = await pageWidths(page);
  expect(agentsContent).toBe(agentsWindow);
  await docsShot('agents-connected-client-phone');
  await page.setViewportSize({ width: 1100, height: 800 });

  // Archiving asks first, naming the client it would disconnect for good; Cancel leaves both.
  const connections = async () => (await h.db.sql`select count(*)::int as n from oauth_connections`)[0]!.n;
  const dialog = page.getByRole('dialog');
  const archive = card.getByRole('button', { name: 'Archive', exact: true });
  await archive.click();
  expect(await dialog.getByRole('heading').textContent()).toBe('Archive researcher?');
  expect(await dialog.locator('p').allTextContents()).toEqual([
    'Its API keys stop working at once, and it receives no new messages: what is posted to its threads while it is archived never reaches it, even once it is unarchived.',
    'Its connected client, Research Assistant, is disconnected for good: connecting again after an unarchive takes a new approval.',
    'Unarchive gives its keys back.',
  ]);
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'detached' });
  expect((await h.db.sql`select archived_at from agents where username = 'researcher'`)[0]!.archived_at).toBeNull();
  expect(await connections()).toBe(1);
  expect(await focused()).toEqual(['', 'Archive']);

  // Disconnect asks too. Cancel keeps the client and gives the focus back to the button; once
  // confirmed, the client is gone and the focus is on the section, the button having gone with it.
  const disconnect = card.getByRole('button', { name: 'Disconnect' });
  await disconnect.click();
  expect(await dialog.getByRole('heading').textContent()).toBe('Disconnect Research Assistant from researcher?');
  expect(await dialog.locator('p').allTextContents()).toEqual([
    'Research Assistant can no longer act as researcher: its next call is refused, and its refresh token stops working.',
    'Connecting it again takes a new approval on the consent page.',
  ]);
  expect(await axeViolations(page)).toEqual([]);
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'detached' });
  expect(await connections()).toBe(1);
  expect(await focused()).toEqual(['', 'Disconnect']);
  await disconnect.click();
  await dialog.getByRole('button', { name: 'Disconnect' }).click();
  await card.getByText('No connected clients.').waitFor();
  expect(await connections()).toBe(0);
  expect(await focused()).toEqual(['connections-heading-researcher', 'Connected clients of researcher']);
  await card.locator('td[data-label="Connected clients"]', { hasText: '0' }).waitFor();
}, 30_000);

test('a request that cannot go back to its client gets a page in the dashboard look, not a bare error', async () => {
  const { page } = b;
  const request = await startAuthorization('Misconfigured Client');
  const wrongReturn = new URL(request.url);
  wrongReturn.searchParams.set('redirect_uri', 'https://elsewhere.example/callback');
  const res = await page.goto(wrongReturn.href);
  expect(res!.status()).toBe(400);
  await page.getByRole('heading', { name: 'This connection cannot go on' }).waitFor();
  expect(await page.locator('.error').textContent()).toContain('redirect_uri');
  expect(await axeViolations(page)).toEqual([]);
  await docsShot('oauth-error');
}, 20_000);

test('among more than a handful of agents, a search box narrows the choice; the chosen one stays chosen; Enter there never approves', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  for (const name of ['crew-alpha', 'crew-bravo', 'crew-charlie', 'crew-delta', 'crew-echo', 'ops-foxtrot']) await h.agent(name);
  const active = (await h.db.sql`select count(*)::int as n from agents where archived_at is null`)[0]!.n;
  const before = returns.length;
  const request = await startAuthorization('Crowded Client');
  await page.goto(request.url);
  await page.getByRole('heading', { name: 'Connect Crowded Client' }).waitFor();
  const search = page.getByLabel('Find an agent by name');
  const said = page.locator('#agent-search-count');
  expect(await page.getByRole('radio').count()).toBe(active);
  expect(await said.textContent()).toBe(`${active} agents.`);

  await search.fill('crew');
  await said.getByText(`5 of ${active} agents match.`).waitFor();
  expect(await radiosShown()).toEqual(['crew-alpha', 'crew-bravo', 'crew-charlie', 'crew-delta', 'crew-echo']);
  await page.getByRole('radio', { name: 'crew-charlie' }).check();
  await search.fill('OPS');
  await said.getByText(`1 of ${active} agents match.`).waitFor();
  expect(await radiosShown()).toEqual(['crew-charlie', 'ops-foxtrot']);
  await search.fill('nobody');
  await said.getByText('No agent\'s name contains “nobody”.').waitFor();
  expect(await radiosShown()).toEqual(['crew-charlie']);
  expect(await page.getByRole('radio', { name: 'crew-charlie' }).isChecked()).toBe(true);
  expect(await axeViolations(page)).toEqual([]);
  await b.screenshot('oauth-consent-search');

  // Enter in the search box narrows the list and stays on the page; only Approve approves.
  await search.press('Enter');
  await search.fill('');
  await said.getByText(`${active} agents.`).waitFor();
  expect(await page.getByRole('radio').count()).toBe(active);
  expect(returns).toHaveLength(before);
  await page.getByRole('button', { name: 'Approve' }).click();
  const approved = await cameBack(before + 1);
  expect(approved.searchParams.get('state')).toBe(request.state);
  const [connected] = await h.db.sql`select a.username from oauth_connections c join agents a on a.id = c.agent_id where c.client_id = ${request.clientId}`;
  expect(connected!.username).toBe('crew-charlie');
}, 30_000);
