import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdirSync } from 'node:fs';
import type { BrowserContext, Page } from 'playwright-core';
import { invitePerson } from '../src/domain/people';
import { buildApp } from '../src/http/app';
import { createLogger } from '../src/log';
import { launchChromium } from './support/chromium';
import { EMOJI } from './support/emoji';
import { uniqueName, useHarness } from './support/harness';

// End to end in a real headless Chromium against the real server listening on a local port.
// Sessions are checked every 200 ms, so that an expired one ends the live view quickly.
const h = useHarness({ SESSION_CHECK_MS: '200' });
// U+1F600, one character of two UTF-16 code units.
const logLines: Record<string, any>[] = [];
const ARTIFACTS = 'test-artifacts/dashboard';
const SCREENSHOTS = 'docs/screenshots';

let server: ReturnType<ReturnType<typeof buildApp>['listen']>;
let base: string;
let context: BrowserContext;
let page: Page;
let browser: Awaited<ReturnType<typeof launchChromium>> | undefined;

beforeAll(async () => {
  const log = createLogger('info', (line) => logLines.push(JSON.parse(line)));
  server = buildApp({ sql: h.db.sql, config: h.config, log, inboxSignal: h.inboxSignal, agentCache: h.agentCache }).listen({ hostname: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${server.server!.port}`;
  browser = await launchChromium({ width: 1100, height: 800 });
  context = browser.context;
  page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(10_000);
  page.on('dialog', (dialog) => void dialog.accept());
  mkdirSync(ARTIFACTS, { recursive: true });
}, 30_000);

afterAll(async () => {
  await browser?.close();
  await server?.stop(true);
});

// Every run leaves full-page shots under test-artifacts/; the few kept in the docs are refreshed
// only on request (UPDATE_SCREENSHOTS=1), so that a test run never changes tracked files.
async function screenshot(name: string, forDocs = false) {
  await page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage: true });
  if (forDocs && process.env.UPDATE_SCREENSHOTS === '1') await page.screenshot({ path: `${SCREENSHOTS}/${name}.png` });
}

// A live refresh redraws the list and closes whatever was open (a known defect of the page), so
// the attempt log and its first detail are opened again until `text` in it can be read.
async function openAttemptDetail(deliveryId: string, text: string) {
  const log = page.locator(`[data-delivery="${deliveryId}"] .attempts`);
  for (let i = 0; i < 10; i++) {
    if ((await log.getAttribute('open')) === null) await log.locator('> summary').click();
    const detail = log.locator('.attempt-detail').first();
    if ((await detail.getAttribute('open')) === null) await detail.locator('> summary').click({ timeout: 2_000 }).catch(() => {});
    if (await detail.getByText(text).isVisible()) return;
  }
  throw new Error(`the attempt detail of ${deliveryId} never stayed open long enough to show ${text}`);
}

const agentCall = async (method: string, path: string, key: string, body?: unknown) => {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await res.json()) as any;
};

test('a person signs in, runs agents and threads, and watches deliveries move live', async () => {
  await invitePerson(h.db.sql, { email: 'ada@example.com', username: 'ada' });

  await page.goto(`${base}/dashboard/deliveries`);
  await page.waitForURL(`${base}/dashboard/sign-in`);
  await signIn('ada@example.com', 'ada', () => screenshot('sign-in'));

  // Register two agents; the key is shown once.
  await page.getByRole('link', { name: 'Agents' }).click();
  const keys: Record<string, string> = {};
  for (const username of ['writer', 'reader']) {
    await page.getByLabel('Username', { exact: true }).fill(username);
    await page.getByRole('button', { name: 'Register' }).click();
    await page.locator('#new-key-agent', { hasText: username }).waitFor();
    keys[username] = (await page.locator('#new-key-value').textContent())!;
  }
  const writerKey = keys.writer!;
  const readerKey = keys.reader!;
  expect(readerKey).toMatch(/^agt_/);

  // Add a webhook to reader: its secret is shown at once and can be revealed later.
  const readerCard = page.locator('[data-agent="reader"]');
  await readerCard.getByLabel('Webhook URL').fill('http://127.0.0.1:9/reader');
  await readerCard.getByRole('button', { name: 'Add webhook' }).click();
  await page.locator('[data-agent="reader"] .secret code', { hasText: 'whsec_' }).waitFor();
  const [stored] = await h.db.sql`select webhook_url, signing_secret from agents where username = 'reader'`;
  expect(stored!.webhook_url).toBe('http://127.0.0.1:9/reader');
  await expect(page.locator('[data-agent="reader"] .secret code').textContent()).resolves.toBe(stored!.signing_secret);
  await page.reload();
  await page.locator('[data-agent="reader"]').getByRole('button', { name: 'Reveal secret' }).click();
  await page.locator('[data-agent="reader"] .secret code', { hasText: stored!.signing_secret }).waitFor();
  await screenshot('agents', true);

  // An agent opens a thread; the person posts into it as themselves.
  const thread = await agentCall('POST', '/api/threads', writerKey, { title: 'Launch plan', goal: 'Agree the launch date', participantUsernames: ['reader'] });
  const threadId = thread.data.id as string;
  await page.getByRole('link', { name: 'Threads' }).click();
  const card = page.locator(`[data-thread="${threadId}"]`);
  await card.getByLabel('Post as yourself').fill('Please confirm the date by Friday.');
  await card.getByRole('button', { name: 'Post' }).click();
  await page.locator('#toast', { hasText: 'Posted to 2 recipients.' }).waitFor();
  const [posted] = await h.db.sql`select id, sender from messages where thread_id = ${threadId}`;
  expect(posted!.sender).toBe('ada');

  // Watch reader's delivery move to Delivered without reloading the page.
  await page.getByRole('link', { name: 'Deliveries' }).click();
  await page.locator('#live', { hasText: 'Live' }).waitFor();
  const [delivery] = await h.db.sql`
    select d.id from deliveries d join agents a on a.id = d.recipient_id where d.message_id = ${posted!.id} and a.username = 'reader'`;
  const row = page.locator(`[data-delivery="${delivery!.id}"]`);
  await expect(row.getAttribute('data-step')).resolves.toBe('accepted');
  await h.db.sql`
    insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status, response_body, request_headers)
    values (${delivery!.id}, 1, 1, 48, 200, 'thanks, queued', ${h.db.sql.json({ 'Content-Type': 'application/json', 'X-Signature-256': '(signature)' })})`;
  await h.db.sql`update deliveries set step = 'notified', notified_at = now() where id = ${delivery!.id}`;
  await page.locator(`[data-delivery="${delivery!.id}"][data-step="notified"]`).waitFor();
  expect((await agentCall('POST', `/api/deliveries/${delivery!.id}/delivered`, readerKey)).success).toBe(true);
  await page.locator(`[data-delivery="${delivery!.id}"][data-step="delivered"]`).waitFor();
  await openAttemptDetail(delivery!.id, 'thanks, queued');
  // What the detail holds, whether or not a refresh has closed it again since.
  expect(await page.locator(`[data-delivery="${delivery!.id}"] .attempt-detail`).first().textContent()).toContain('X-Signature-256: (signature)');
  await screenshot('deliveries', true);

  // A failure shows up live with its step and error; resend puts it back to Accepted.
  const second = await agentCall('POST', `/api/threads/${threadId}/messages`, writerKey, { content: 'Second notice' });
  const [failing] = await h.db.sql`select id from deliveries where message_id = ${second.data.id}`;
  await page.locator(`[data-delivery="${failing!.id}"]`).waitFor();
  // Between two attempts it reads as retrying, with the last error and the next attempt's time.
  await h.db.sql`insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status) values (${failing!.id}, 1, 1, 30, 503)`;
  await h.db.sql`update deliveries set next_attempt_at = now() + interval '12 seconds' where id = ${failing!.id}`;
  await page.locator(`[data-delivery="${failing!.id}"]`).getByText('Retrying: attempt 1 failed (the handler answered HTTP 503); next attempt at').waitFor();
  await h.db.sql`
    insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status, error)
    values (${failing!.id}, 1, 4, 2001, 500, 'Handler answered 500')`;
  await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'Handler answered 500' where id = ${failing!.id}`;
  const failedRow = page.locator(`[data-delivery="${failing!.id}"][data-step="failed"]`);
  await failedRow.getByText('Failed at Accepted: Handler answered 500').waitFor();
  await page.getByLabel('Failed', { exact: true }).check();
  await page.waitForFunction("document.querySelectorAll('[data-delivery]').length === 1");
  await failedRow.waitFor();
  await screenshot('deliveries-failed');
  await failedRow.getByRole('button', { name: 'Resend' }).click();
  await page.locator('#toast', { hasText: 'Resent to reader.' }).waitFor();
  const [resent] = await h.db.sql`select step from deliveries where id = ${failing!.id}`;
  expect(resent!.step).toBe('accepted');

  // On a phone-sized screen the same page stays usable.
  await page.getByLabel('Failed', { exact: true }).uncheck();
  await page.setViewportSize({ width: 390, height: 844 });
  await page.locator(`[data-delivery="${delivery!.id}"]`).waitFor();
  await screenshot('deliveries-phone', true);
  // The attempt log keeps its column names on a phone, one value per line.
  // A live refresh redraws the list and closes the log (a known defect of the page): open it again
  // until it is seen open.
  const log = page.locator(`[data-delivery="${failing!.id}"] .attempts`);
  for (let i = 0; i < 5 && !(await log.getAttribute('open').then((v) => v !== null)); i++) {
    await log.locator('> summary').click();
  }
  const statusCell = page.locator(`[data-delivery="${failing!.id}"] .attempts tbody tr`).first().locator('td[data-label="Status"]');
  // Runs in the page; the project's types have no DOM, hence the window's shape spelled out.
  type PageWindow = { getComputedStyle(element: unknown, pseudo: string): { content: string } };
  expect(await statusCell.evaluate((td) => (globalThis as unknown as PageWindow).getComputedStyle(td, '::before').content)).toBe('"Status: "');
  await screenshot('attempts-phone');
  await page.setViewportSize({ width: 1100, height: 800 });

  // The opener asks to close; the person confirms.
  await agentCall('POST', `/api/threads/${threadId}/close`, writerKey);
  await page.getByRole('link', { name: 'Threads' }).click();
  await page.locator(`[data-thread="${threadId}"]`).getByText('writer asked to close this thread.').waitFor();
  await screenshot('threads', true);
  await page.locator(`[data-thread="${threadId}"]`).getByRole('button', { name: 'Confirm close' }).click();
  await page.locator(`[data-thread="${threadId}"] .badge`, { hasText: 'Closed' }).waitFor();
  const [closed] = await h.db.sql`select state from threads where id = ${threadId}`;
  expect(closed!.state).toBe('closed');

  // Keyboard: the skip link is the first stop on a fresh page.
  await page.reload();
  await page.locator(`[data-thread="${threadId}"]`).waitFor();
  await page.keyboard.press('Tab');
  await expect(page.evaluate('document.activeElement?.textContent')).resolves.toBe('Skip to content');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(`${base}/dashboard/sign-in`);
  expect((await h.db.sql`select count(*)::int as n from sessions`)[0]!.n).toBe(0);
}, 40_000);

test('the post form takes emoji up to the bounds the server counts in code points, and shows its refusal beyond', async () => {
  const [writer, reader] = await Promise.all(['emoji', 'emoji'].map((n) => h.agent(uniqueName(n))));
  const thread = await agentCall('POST', '/api/threads', writer!.key, { title: 'Emoji', participantUsernames: [reader!.username] });
  const threadId = thread.data.id as string;
  await page.goto(`${base}/dashboard/sign-in`);
  await signIn('ada@example.com', 'ada');
  await page.getByRole('link', { name: 'Threads' }).click();
  const card = page.locator(`[data-thread="${threadId}"]`);
  await card.getByLabel('Post as yourself').fill(EMOJI.repeat(10_000));
  await card.getByLabel('Summary').fill(EMOJI.repeat(201));
  await card.getByRole('button', { name: 'Post' }).click();
  await page.locator('#toast', { hasText: 'summary must be at most 200 characters' }).waitFor();
  await card.getByLabel('Summary').fill(EMOJI.repeat(200));
  await card.getByRole('button', { name: 'Post' }).click();
  await page.locator('#toast', { hasText: 'Posted to 2 recipients.' }).waitFor();
  const stored = await h.db.sql`select content, summary from messages where thread_id = ${threadId}`;
  expect([...stored]).toEqual([{ content: EMOJI.repeat(10_000), summary: EMOJI.repeat(200) }]);
}, 20_000);

// The threads page pages with the same code (pagedList in dashboard.js).
test('the agents page shows 50 at a time, the next page on "Show more agents"', async () => {
  for (let i = 0; i < 55; i++) await h.agent(uniqueName('many'));
  const [count] = await h.db.sql`select count(*)::int as n from agents`;
  const shown = Math.min(count!.n as number, 100);
  await page.goto(`${base}/dashboard/sign-in`);
  await signIn('ada@example.com', 'ada');
  await page.getByRole('link', { name: 'Agents' }).click();
  const cards = page.locator('#agents > li');
  await page.getByRole('button', { name: 'Show more agents' }).waitFor();
  expect(await cards.count()).toBe(50);
  await page.getByRole('button', { name: 'Show more agents' }).click();
  await cards.nth(shown - 1).waitFor();
  expect(await cards.count()).toBe(shown);
  expect(await page.getByRole('button', { name: 'Show more agents' }).isVisible()).toBe(count!.n > 100);
  await screenshot('agents-paged');
}, 30_000);

test('when the session expires, the live deliveries page says so instead of reconnecting', async () => {
  await page.goto(`${base}/dashboard/sign-in`);
  await signIn('ada@example.com', 'ada');
  await page.locator('#live', { hasText: 'Live' }).waitFor();

  await h.db.sql`update sessions set expires_at = now() - interval '1 second'`;
  await page.getByRole('alert').getByText('Your session expired; sign in again.').waitFor();
  await expect(page.locator('#live').textContent()).resolves.toBe('Signed out');
  await screenshot('session-expired');
  await page.getByRole('link', { name: 'Sign in again' }).click();
  await page.waitForURL(`${base}/dashboard/sign-in`);
}, 20_000);

test('when the session ended while the server was away, the page says so once its stream is refused', async () => {
  // The page loads the list twice (at start, and once the stream is ready); wait for both, so that
  // the refused stream is the first thing to meet the ended session.
  let listLoads = 0;
  const countLoads = (res: { url(): string }) => void (res.url().endsWith('/dashboard/api/deliveries') && listLoads++);
  page.on('response', countLoads);
  await page.goto(`${base}/dashboard/sign-in`);
  await signIn('ada@example.com', 'ada');
  await page.locator('#live', { hasText: 'Live' }).waitFor();
  while (listLoads < 2) await Bun.sleep(20);
  page.off('response', countLoads);

  const port = server.server!.port;
  await server.stop(true);
  await page.locator('#live', { hasText: 'Reconnecting…' }).waitFor();
  await h.db.sql`update sessions set expires_at = now() - interval '1 second'`;
  server = buildApp({ sql: h.db.sql, config: h.config, log: createLogger('info', () => {}), inboxSignal: h.inboxSignal, agentCache: h.agentCache }).listen({ hostname: '127.0.0.1', port });

  await page.getByRole('alert').getByText('Your session expired; sign in again.').waitFor();
  await expect(page.locator('#live').textContent()).resolves.toBe('Signed out');
  expect(page.url()).toBe(`${base}/dashboard/deliveries`);
}, 20_000);

// Signs in on the sign-in page with the code the server logged (no SMTP configured).
async function signIn(email: string, username: string, beforeSending?: () => Promise<void>) {
  await page.getByLabel('Email', { exact: true }).fill(email);
  await beforeSending?.();
  const codesBefore = loggedCodes(email).length;
  await page.getByRole('button', { name: 'Send me a code' }).click();
  await page.getByLabel('Code from the email').waitFor();
  await page.getByLabel('Code from the email').fill(await newCode(email, codesBefore));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${base}/dashboard/deliveries`);
  await page.locator('#me', { hasText: username }).waitFor();
}

const loggedCodes = (email: string) => logLines.filter((l) => l.event === 'sign_in_code' && l.email === email).map((l) => l.code as string);

async function newCode(email: string, codesBefore: number): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const codes = loggedCodes(email);
    if (codes.length > codesBefore) return codes.at(-1)!;
    await Bun.sleep(50);
  }
  throw new Error(`no new sign-in code was logged for ${email}`);
}
