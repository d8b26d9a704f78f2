import { expect, test } from 'bun:test';
import { loadConfig } from '../src/config';
import { invitePerson } from '../src/domain/people/people';
import { silentLogger } from '../src/log';
import { startWorker } from '../src/webhooks/worker';
import { EMOJI } from './support/emoji';
import { uniqueName } from './support/harness';
import { axeViolations, pageWidths, untilCount, useDashboardBrowser, type PageGlobals } from './support/dashboard-browser';
import { eventually, receiver } from './support/receiver';
import { FAST_WEBHOOKS } from './support/webhooks';
import { BY_CLI } from '../src/domain/people/audit';

// End to end in a real headless Chromium against the real server listening on a local port, as a
// person would use it. Sessions are checked every 200 ms, so that an expired one ends the live view
// quickly. Each run leaves full-page screenshots in test-artifacts/dashboard; the ones in
// docs/screenshots are refreshed on request (UPDATE_SCREENSHOTS=1), so a run never changes tracked files.
const b = useDashboardBrowser({ SESSION_CHECK_MS: '200' });
const { h } = b;

async function docsShot(name: string) {
  // A passing notice would cover part of the picture.
  await b.page.locator('#toast:not(.show)').waitFor({ state: 'attached' });
  await b.screenshot(name);
  if (process.env.UPDATE_SCREENSHOTS === '1') await b.page.screenshot({ path: `docs/screenshots/${name}.png` });
}

const loggedCodes = (email: string) => b.logLines.filter((l) => l.event === 'sign_in_code' && l.email === email).map((l) => l.code as string);

// Signs in on the sign-in page with the code the server logged (no SMTP configured).
async function signInOnPage(email: string, username: string) {
  const { page } = b;
  await page.getByLabel('Email', { exact: true }).fill(email);
  const before = loggedCodes(email).length;
  await page.getByRole('button', { name: 'Send me a code' }).click();
  await page.getByLabel('Code from the email').waitFor();
  while (loggedCodes(email).length === before) await Bun.sleep(20);
  await page.getByLabel('Code from the email').fill(loggedCodes(email).at(-1)!);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#me', { hasText: username }).waitFor();
}

test('a person signs in, runs agents and threads, and watches deliveries move live', async () => {
  const { page, base } = b;
  await invitePerson(h.db.sql, BY_CLI, { email: 'ada@example.com', username: 'ada' });
  await page.goto(`${base}/dashboard/deliveries`);
  await page.waitForURL(`${base}/dashboard/sign-in?next=%2Fdashboard%2Fdeliveries`);
  // Only the first form shows (a display rule once overrode `hidden` and showed both).
  expect([await page.locator('#code-form').isVisible(), await page.locator('#verify-form').isVisible()]).toEqual([true, false]);
  await page.getByLabel('Email', { exact: true }).fill('ada@example.com');
  await b.screenshot('sign-in');
  await signInOnPage('ada@example.com', 'ada');
  expect(page.url()).toBe(`${base}/dashboard/deliveries`);
  await page.getByText('No deliveries yet').waitFor();

  // Register two agents; the key is shown once. A taken name is refused next to the field.
  await page.getByRole('link', { name: 'Agents', exact: true }).click();
  const keys: Record<string, string> = {};
  for (const username of ['writer', 'reader']) {
    await page.getByLabel('Username', { exact: true }).fill(username);
    await page.getByRole('button', { name: 'Register' }).click();
    await page.locator('#new-key-agent', { hasText: username }).waitFor();
    keys[username] = (await page.locator('#new-key-value').textContent())!;
  }
  expect(keys.reader).toMatch(/^agt_/);
  await page.getByLabel('Username', { exact: true }).fill('writer');
  await page.getByRole('button', { name: 'Register' }).click();
  await page.locator('#register-error', { hasText: 'An agent named writer already exists.' }).waitFor();
  expect(await page.getByLabel('Username', { exact: true }).getAttribute('aria-invalid')).toBe('true');
  expect(await page.getByLabel('Username', { exact: true }).getAttribute('aria-describedby')).toContain('register-error');

  // Add a webhook to reader: its secret is shown at once and can be revealed later. An agent's
  // webhook, clients and archiving open beneath its row on demand.
  const readerCard = page.locator('[data-agent="reader"]');
  const manageReader = readerCard.getByRole('button', { name: /^Manage/ });
  expect(await manageReader.getAttribute('aria-expanded')).toBe('false');
  expect(await readerCard.getByLabel('Webhook URL').count()).toBe(0);
  await manageReader.click();
  expect(await manageReader.getAttribute('aria-expanded')).toBe('true');
  expect(await readerCard.locator('.detail-row').getAttribute('id')).toBe(await manageReader.getAttribute('aria-controls'));
  await readerCard.getByLabel('Webhook URL').fill('http://127.0.0.1:9/reader');
  await readerCard.getByRole('button', { name: 'Add webhook' }).click();
  await page.locator('[data-agent="reader"] .secret code', { hasText: 'whsec_' }).waitFor();
  const [stored] = await h.db.sql`select webhook_url, signing_secret from agents where username = 'reader'`;
  expect(stored!.webhook_url).toBe('http://127.0.0.1:9/reader');
  await readerCard.getByRole('cell', { name: 'Webhook', exact: true }).waitFor();
  await page.reload();
  await manageReader.click();
  await page.locator('[data-agent="reader"]').getByRole('button', { name: 'Reveal secret' }).click();
  await page.locator('[data-agent="reader"] .secret code', { hasText: stored!.signing_secret }).waitFor();
  await b.screenshot('agents-webhook-added');

  // An agent opens a thread while the Threads page is open: it appears without a reload.
  await page.getByRole('link', { name: 'Threads', exact: true }).click();
  await page.getByText('No threads yet. Agents open them.').waitFor();
  const thread = await b.agentCall('POST', '/api/threads', keys.writer!, { title: 'Launch plan', goal: 'Agree the launch date', participantUsernames: ['reader'] });
  const threadId = thread.data.id as string;
  const card = page.locator(`[data-thread="${threadId}"]`);
  await card.waitFor();
  await card.getByLabel('Post as yourself').fill('Please confirm the date by Friday.');
  await card.getByRole('button', { name: 'Post', exact: true }).click();
  await card.getByText('Posted to 2 recipients.').waitFor();
  const [posted] = await h.db.sql`select id, sender from messages where thread_id = ${threadId}`;
  expect(posted!.sender).toBe('ada');

  // Watch reader's delivery move to Delivered without reloading the page.
  await page.getByRole('link', { name: 'Deliveries', exact: true }).click();
  await page.locator('#live', { hasText: 'Live' }).waitFor();
  const [delivery] = await h.db.sql`
    select d.id from deliveries d join agents a on a.id = d.recipient_id where d.message_id = ${posted!.id} and a.username = 'reader'`;
  const row = page.locator(`[data-delivery="${delivery!.id}"]`);
  await expect(row.getAttribute('data-step')).resolves.toBe('accepted');
  await row.getByRole('button', { name: /^Details/ }).click();
  await h.db.sql`
    insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status, response_body, request_headers)
    values (${delivery!.id}, 1, 1, 48, 200, 'thanks, queued', ${h.db.sql.json({ 'Content-Type': 'application/json', 'X-Signature-256': '(signature)' })})`;
  await h.db.sql`update deliveries set step = 'notified', notified_at = now() where id = ${delivery!.id}`;
  await page.locator(`[data-delivery="${delivery!.id}"][data-step="notified"]`).waitFor();
  expect((await b.agentCall('POST', `/api/deliveries/${delivery!.id}/delivered`, keys.reader!)).success).toBe(true);
  await page.locator(`[data-delivery="${delivery!.id}"][data-step="delivered"]`).waitFor();
  // The detail stays open through live updates: the attempt log, then an attempt's request and answer.
  await row.locator('.attempts > summary').click();
  await row.locator('.attempt-detail > summary').click();
  const detail = row.locator('.attempt-detail');
  await detail.getByText('thanks, queued').waitFor();
  expect(await detail.textContent()).toContain('X-Signature-256: (signature)');
  expect(await detail.textContent()).toContain(`{"event":"message.created","data":{"deliveryId":"${delivery!.id}"`);
  await docsShot('deliveries');

  // A failure shows up live with its step and error; resend puts it back to Accepted.
  const second = await b.agentCall('POST', `/api/threads/${threadId}/messages`, keys.writer!, { content: 'Second notice' });
  const [failing] = await h.db.sql`select id from deliveries where message_id = ${second.data.id}`;
  const failingRow = page.locator(`[data-delivery="${failing!.id}"]`);
  // A delivery is open, so the new rows wait above the list, counted, until asked for.
  await page.getByRole('button', { name: /^\d+ new deliver(y|ies) — show$/ }).click();
  await failingRow.waitFor();
  await failingRow.getByRole('button', { name: /^Details/ }).click();
  // Between two attempts it reads as retrying, with the last error and the next attempt's time.
  await h.db.sql`insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status) values (${failing!.id}, 1, 1, 30, 503)`;
  await h.db.sql`update deliveries set next_attempt_at = now() + interval '12 seconds' where id = ${failing!.id}`;
  await failingRow.getByText('Retrying: attempt 1 failed (the handler answered HTTP 503); next attempt at').waitFor();
  await failingRow.locator('.badge', { hasText: 'Retrying' }).waitFor();
  await h.db.sql`
    insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status, error)
    values (${failing!.id}, 1, 4, 2001, 500, 'Handler answered 500')`;
  await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'Handler answered 500', next_attempt_at = null where id = ${failing!.id}`;
  await failingRow.getByText('Failed at Accepted: Handler answered 500').waitFor();
  // The dots say what the sentence says: failed at Accepted, and no step after it marked.
  expect(await failingRow.locator('.pipeline').first().locator('li.failed').allTextContents()).toEqual(['Accepted (failed here)']);
  await page.locator('[data-count="failed"]', { hasText: 'Failed 1' }).waitFor();
  await page.getByLabel('State').selectOption('failed');
  await untilCount(page, '[data-delivery]', 1);
  expect(page.url()).toBe(`${base}/dashboard/deliveries?state=failed`);
  await b.screenshot('deliveries-failed');
  await failingRow.getByRole('button', { name: 'Resend' }).click();
  await page.locator('#toast', { hasText: 'Resent to reader.' }).waitFor();
  const [resent] = await h.db.sql`select step from deliveries where id = ${failing!.id}`;
  expect(resent!.step).toBe('accepted');
  await page.locator('[data-count="failed"]', { hasText: 'Failed 0' }).waitFor();

  // On a phone-sized screen the same page stays usable: nothing scrolls sideways, and the attempt
  // log keeps its column names, one value per line.
  await page.getByLabel('State').selectOption('');
  // The page writes the filter into its address after it renders: a reload before that would
  // bring the Failed filter back.
  await page.waitForURL(`${base}/dashboard/deliveries`);
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await row.waitFor();
  expect(await page.getByLabel('Search').isVisible()).toBe(false);
  await docsShot('deliveries-phone');
  await failingRow.getByRole('button', { name: /^Details/ }).click();
  const [wide, seen] = await pageWidths(page);
  expect(wide).toBeLessThanOrEqual(seen!);
  if ((await failingRow.locator('.attempts').getAttribute('open')) === null) await failingRow.locator('.attempts > summary').click();
  const statusCell = failingRow.locator('.attempts tbody tr').first().locator('td[data-label="Status"]');
  expect(await statusCell.evaluate((td) => (globalThis as unknown as PageGlobals).getComputedStyle(td, '::before').content)).toBe('"Status: "');
  await b.screenshot('attempts-phone');
  await page.setViewportSize({ width: 1100, height: 800 });

  // The opener asks to close: the navigation counts it at once, and the person confirms.
  await b.agentCall('POST', `/api/threads/${threadId}/close`, keys.writer!);
  await page.locator('[data-count="close-requests"]', { hasText: 'Close requests 1' }).click();
  await page.waitForURL(`${base}/dashboard/threads?state=close-pending`);
  await page.locator(`[data-thread="${threadId}"]`).getByText('writer asked to close this thread.').waitFor();
  await docsShot('threads');
  await page.locator(`[data-thread="${threadId}"]`).getByRole('button', { name: 'Confirm close' }).click();
  await page.getByText('No close requests wait for a decision.').waitFor();
  const [closed] = await h.db.sql`select state from threads where id = ${threadId}`;
  expect(closed!.state).toBe('closed');
  await page.locator('[data-count="close-requests"]', { hasText: 'Close requests 0' }).waitFor();

  // Keyboard: the skip link is the first stop on a fresh page.
  await page.reload();
  await page.getByRole('heading', { name: 'Close requests' }).waitFor();
  await page.keyboard.press('Tab');
  await expect(page.evaluate('document.activeElement?.textContent')).resolves.toBe('Skip to content');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(`${base}/dashboard/sign-in`);
  expect((await h.db.sql`select count(*)::int as n from sessions`)[0]!.n).toBe(0);
}, 60_000);

test('the post form takes emoji up to the bounds the server counts in code points, and shows its refusal next to the field', async () => {
  const { page, base } = b;
  const [writer, reader] = await Promise.all(['emoji', 'emoji'].map((n) => h.agent(uniqueName(n))));
  const thread = await b.agentCall('POST', '/api/threads', writer!.key, { title: 'Emoji', participantUsernames: [reader!.username] });
  const threadId = thread.data.id as string;
  await b.signIn('ada@example.com', 'ada');
  await page.goto(`${base}/dashboard/threads/${threadId}`);
  // On the thread's own page the post form follows the messages.
  const reply = page.locator('#thread-end');
  await reply.getByLabel('Post as yourself').fill(EMOJI.repeat(10_000));
  await reply.getByLabel('Summary').fill(EMOJI.repeat(201));
  await reply.getByRole('button', { name: 'Post', exact: true }).click();
  const error = page.locator(`#post-error-${threadId}`);
  await error.getByText('summary must be at most 200 characters').waitFor();
  expect(await reply.getByLabel('Summary').getAttribute('aria-invalid')).toBe('true');
  expect(await reply.getByLabel('Summary').getAttribute('aria-describedby')).toBe(`post-error-${threadId}`);
  await reply.getByLabel('Summary').fill(EMOJI.repeat(200));
  await reply.getByRole('button', { name: 'Post', exact: true }).click();
  await reply.getByText('Posted to 2 recipients.').waitFor();
  expect(await error.isVisible()).toBe(false);
  const stored = await h.db.sql`select content, summary from messages where thread_id = ${threadId}`;
  expect([...stored]).toEqual([{ content: EMOJI.repeat(10_000), summary: EMOJI.repeat(200) }]);
  // The thread's own page lists the message with its recipients' steps, live.
  await page.locator('[data-message]').first().getByText(reader!.username).waitFor();
}, 20_000);

test("a thread's own page reads top to bottom, and removing a participant asks first in the page's own dialog", async () => {
  const { page, base } = b;
  const [writer, reader] = await Promise.all(['talk', 'talk'].map((n) => h.agent(uniqueName(n))));
  const thread = await b.agentCall('POST', '/api/threads', writer!.key, { title: 'Conversation', participantUsernames: [reader!.username] });
  const threadId = thread.data.id as string;
  for (let i = 1; i <= 50; i++) await b.agentCall('POST', `/api/threads/${threadId}/messages`, writer!.key, { content: `Earlier ${i}` });
  await b.signIn('ada@example.com', 'ada');
  await page.goto(`${base}/dashboard/threads/${threadId}`);
  await page.locator('#live', { hasText: 'Live' }).waitFor();
  const shown = async () => {
    const messages = page.locator('[data-message]');
    const ids: (string | null)[] = [];
    for (let i = 0; i < (await messages.count()); i++) ids.push(await messages.nth(i).getAttribute('data-message'));
    return ids;
  };
  const stored = async () => (await h.db.sql`select id from messages where thread_id = ${threadId} order by id`).map((r) => r.id as string);
  await untilCount(page, '[data-message]', 50);
  expect(await shown()).toEqual(await stored());
  expect(await page.getByRole('button', { name: 'Show older messages' }).count()).toBe(0);

  // A new message arrives at the bottom, above the reply; the one that no longer fits the first
  // page is behind the button above the list.
  const { data: newest } = await b.agentCall('POST', `/api/threads/${threadId}/messages`, writer!.key, { content: 'The newest word' });
  await page.getByRole('button', { name: 'Show older messages' }).waitFor();
  await page.locator(`[data-message="${newest.id}"]`).waitFor();
  expect(await shown()).toEqual((await stored()).slice(1));
  expect(await page.locator(`p.more + ol.messages > li:last-child[data-message="${newest.id}"]`).count()).toBe(1);
  expect(await page.locator('ol.messages + #thread-end').getByLabel('Post as yourself').count()).toBe(1);
  await b.screenshot('thread-conversation');
  await page.getByRole('button', { name: 'Show older messages' }).click();
  await untilCount(page, '[data-message]', 51);
  expect(await shown()).toEqual(await stored());
  expect(await page.getByRole('button', { name: 'Show older messages' }).count()).toBe(0);

  // Remove asks in the page's dialog, which says what happens; Cancel, which has the focus, changes nothing.
  const members = async () =>
    (await h.db.sql`select a.username from participants p join agents a on a.id = p.agent_id where p.thread_id = ${threadId} order by 1`).map((r) => r.username);
  const before = await members();
  expect(before).toEqual([writer!.username, reader!.username].toSorted());
  const remove = page.getByRole('button', { name: `Remove ${reader!.username} from Conversation` });
  await remove.click();
  const dialog = page.getByRole('dialog', { name: `Remove ${reader!.username} from Conversation?` });
  await dialog.waitFor();
  expect(await dialog.locator('#confirm-body p').allTextContents()).toEqual([
    `${reader!.username} loses the thread at once: the thread and its messages answer it 404 from now on, and it can no longer post here.`,
    'Messages from this thread still waiting in its inbox drop out of it, and no doorbell is rung for them from now on. What it already posted stays in the thread.',
    `The dashboard cannot add it back: only an agent still in the thread can (add_participant), and ${reader!.username} then sees the whole history again.`,
  ]);
  await expect(page.evaluate('document.activeElement?.textContent')).resolves.toBe('Cancel');
  await b.screenshot('thread-remove-participant');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  await dialog.waitFor({ state: 'detached' });
  expect(await members()).toEqual(before);
  await expect(page.evaluate('document.activeElement?.getAttribute("aria-label")')).resolves.toBe(`Remove ${reader!.username} from Conversation`);
  // Escape is a Cancel too.
  await remove.click();
  await dialog.waitFor();
  await page.keyboard.press('Escape');
  await dialog.waitFor({ state: 'detached' });
  expect(await members()).toEqual(before);

  await remove.click();
  await dialog.getByRole('button', { name: 'Remove', exact: true }).click();
  await page.locator('#toast', { hasText: `${reader!.username} removed.` }).waitFor();
  expect(await members()).toEqual([writer!.username]);
  await remove.waitFor({ state: 'detached' });

  await page.setViewportSize({ width: 390, height: 844 });
  try {
    await page.locator(`[data-message="${newest.id}"]`).scrollIntoViewIfNeeded();
    const [wide, seen] = await pageWidths(page);
    expect(wide).toBeLessThanOrEqual(seen!);
    await b.screenshot('thread-conversation-phone');
  } finally {
    await page.setViewportSize({ width: 1100, height: 800 });
  }

  // On the Threads page, most recent activity first: a post moves its thread to the top, live.
  // The writer adds the reader back (only an agent can), which is no activity.
  expect((await b.agentCall('POST', `/api/threads/${threadId}/participants`, writer!.key, { username: reader!.username })).success).toBe(true);
  const aside = await b.agentCall('POST', '/api/threads', writer!.key, { title: 'Conversation aside', participantUsernames: [reader!.username] });
  await page.goto(`${base}/dashboard/threads?q=Conversation`);
  await page.locator('#live', { hasText: 'Live' }).waitFor();
  await page.getByText('Most recent activity first').waitFor();
  const listed = async () => {
    const cards = page.locator('[data-thread]');
    const ids: (string | null)[] = [];
    for (let i = 0; i < (await cards.count()); i++) ids.push(await cards.nth(i).getAttribute('data-thread'));
    return ids;
  };
  await untilCount(page, '[data-thread]', 2);
  expect(await listed()).toEqual([aside.data.id, threadId]);
  expect((await b.agentCall('POST', `/api/threads/${threadId}/messages`, writer!.key, { content: 'Back to the conversation' })).success).toBe(true);
  await page.locator(`[data-thread]:first-child[data-thread="${threadId}"]`).waitFor();
  expect(await listed()).toEqual([threadId, aside.data.id]);
  await page.locator(`[data-thread="${threadId}"] .activity`, { hasText: 'Last activity' }).waitFor();
  await b.screenshot('threads-by-activity');
}, 40_000);

test('when the session expires, the live page says so, keeps what is on it, and signing in again returns to it', async () => {
  const { page, base } = b;
  const [writer, reader] = await Promise.all(['exp', 'exp'].map((n) => h.agent(uniqueName(n))));
  const thread = await b.agentCall('POST', '/api/threads', writer!.key, { title: 'Expiring', participantUsernames: [reader!.username] });
  await b.signIn('ada@example.com', 'ada');
  await page.goto(`${base}/dashboard/threads?q=Expiring`);
  await page.locator('#live', { hasText: 'Live' }).waitFor();
  const card = page.locator(`[data-thread="${thread.data.id}"]`);
  await card.getByLabel('Post as yourself').fill('Typed before the session ended');

  await h.db.sql`update sessions set expires_at = now() - interval '1 second'`;
  await page.getByRole('alert').getByText('Your session expired; sign in again.').waitFor();
  await expect(page.locator('#live').textContent()).resolves.toBe('Signed out');
  // An action now says why it failed, next to it, and the page and its text stay.
  await card.getByRole('button', { name: 'Post', exact: true }).click();
  await page.locator(`#post-error-${thread.data.id}`, { hasText: 'Your session expired; sign in again.' }).waitFor();
  expect(await card.getByLabel('Post as yourself').inputValue()).toBe('Typed before the session ended');
  expect(page.url()).toBe(`${base}/dashboard/threads?q=Expiring`);
  await b.screenshot('session-expired');

  await page.getByRole('link', { name: 'Sign in again' }).click();
  await page.getByText('Your session expired; sign in again.').waitFor();
  await signInOnPage('ada@example.com', 'ada');
  expect(page.url()).toBe(`${base}/dashboard/threads?q=Expiring`);
}, 30_000);

test('when the session ended while the server was away, the page says so once its stream is refused', async () => {
  const { page, base } = b;
  await b.signIn('ada@example.com', 'ada');
  await page.goto(`${base}/dashboard/deliveries`);
  await page.locator('#live', { hasText: 'Live' }).waitFor();
  await page.getByRole('heading', { level: 2 }).filter({ hasText: 'newest first' }).waitFor();

  await b.restart(async () => {
    await page.locator('#live', { hasText: 'Reconnecting…' }).waitFor();
    await h.db.sql`update sessions set expires_at = now() - interval '1 second'`;
  });
  await page.getByRole('alert').getByText('Your session expired; sign in again.').waitFor();
  await expect(page.locator('#live').textContent()).resolves.toBe('Signed out');
  expect(page.url()).toBe(`${base}/dashboard/deliveries`);
}, 30_000);

// A handler that is down (500) at /hook and fine at /ok.
const handler = receiver((req) => (req.path === '/ok' ? new Response('ok') : new Response('{"error":"down for maintenance"}', { status: 500 })));

test('a failing webhook shows on the overview and on its agent, and a test event sent to it reports its answer', async () => {
  const { page, base } = b;
  // The worker rings the doorbells and sends the test event; it runs here only, with short retries,
  // so that the tests above keep their hand-made attempts to themselves.
  const config = loadConfig({ ...FAST_WEBHOOKS, WEBHOOK_ALLOW_LOCAL: 'true', DATABASE_URL: h.db.url });
  const worker = await startWorker({ sql: h.db.sql, databaseUrl: h.db.url, config, log: silentLogger });
  try {
    const sender = await h.agent(uniqueName('billing'));
    const failing = await h.agent('invoice-agent', { webhookUrl: handler.url('/hook') });
    const quiet = await h.agent('report-agent', { webhookUrl: handler.url('/ok') });
    const threadId = await h.thread(sender, [failing, quiet], 'Invoices for March');
    const stepsOf = async (username: string) =>
      (await h.db.sql`select d.step from deliveries d join agents a on a.id = d.recipient_id where a.username = ${username}`).map((r) => r.step);
    // The first failure starts the spell; what is posted during it counts against it.
    await h.post(sender, threadId, 'Invoice 1001 is ready');
    await eventually(async () => (await stepsOf('invoice-agent')).join() === 'failed');
    await h.post(sender, threadId, 'Invoice 1002 is ready');
    await h.post(sender, threadId, 'Invoice 1003 is ready');
    await eventually(async () => (await stepsOf('invoice-agent')).every((s) => s === 'failed') && (await stepsOf('report-agent')).every((s) => s === 'notified'), 10_000);
    // report-agent's handler took its doorbells but never reported them delivered: stalled by now.
    await h.db.sql`
      update deliveries d set notified_at = d.notified_at - interval '1 hour', created_at = d.created_at - interval '1 hour'
      from agents a where a.id = d.recipient_id and a.username = 'report-agent'`;
    await b.agentCall('POST', `/api/threads/${threadId}/close`, sender.key);

    await b.signIn('ada@example.com', 'ada');
    await page.setViewportSize({ width: 1100, height: 800 });
    await page.goto(`${base}/dashboard/overview`);
    const [cookie] = await b.context.cookies(`${base}/dashboard/`);
    const overview = (await (await fetch(`${base}/dashboard/api/overview`, { headers: { cookie: `ams_session=${cookie!.value}` } })).json()) as {
      data: { trouble: { username: string; deliveries: number }[] };
    };
    // All three failed in the spell, the first one (accepted before the spell began) included.
    const counted = overview.data.trouble.find((t) => t.username === 'invoice-agent')!.deliveries;
    expect(counted).toBe(3);
    const line = page.locator('[data-trouble="invoice-agent"] .line-text');
    await line.waitFor();
    expect(await line.textContent()).toMatch(new RegExp(`^\\s*invoice-agent — HTTP 500 — ${counted} deliveries since`));
    await page.locator('[data-trouble="invoice-agent"] .badge', { hasText: 'Failing since' }).waitFor();
    expect(await line.getByRole('link', { name: `${counted} deliveries` }).getAttribute('href')).toBe('/dashboard/deliveries?agent=invoice-agent&state=failed');
    await page.getByRole('link', { name: 'report-agent' }).waitFor();
    await page.getByRole('link', { name: 'Invoices for March' }).waitFor();
    await page.locator('.chart-plot canvas').first().waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await docsShot('overview');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await line.waitFor();
    await page.locator('.chart-plot canvas').first().waitFor();
    const [wide, seen] = await pageWidths(page);
    expect(wide).toBeLessThanOrEqual(seen!);
    await b.screenshot('overview-phone');

    // On the Agents page the same webhook reads as failing in its row, the last hour's figure
    // beside it; its detail, open already for the agent the overview linked to, has its figures,
    // and a test event gets the handler's answer, which arrives over the live stream.
    await page.setViewportSize({ width: 1100, height: 800 });
    await line.getByRole('link', { name: 'invoice-agent' }).click();
    await page.waitForURL(`${base}/dashboard/agents?q=invoice-agent`);
    const card = page.locator('[data-agent="invoice-agent"]');
    await card.locator('.badge', { hasText: 'Failing since' }).waitFor();
    expect(await card.locator('.badge', { hasText: 'Failing since' }).textContent()).toContain('— HTTP 500');
    expect(await card.locator('td[data-label="2xx, last hour"]').textContent()).toMatch(/^0% of \d+$/);
    await page.locator('#live', { hasText: 'Live' }).waitFor();
    expect(await card.getByRole('button', { name: /^Manage/ }).getAttribute('aria-expanded')).toBe('true');
    await card.getByRole('button', { name: 'Send test event' }).click();
    const outcome = card.locator('[data-test-outcome]');
    await outcome.filter({ hasText: /Sent .* by ada — HTTP 500 in \d+ ms/ }).waitFor();
    await card.getByText("Test event's request and response").click();
    await card.locator('.test-event pre', { hasText: '"error": "down for maintenance"' }).waitFor();
    await card.getByText('Resend failed since…').click();
    // One plain field for the time; one that does not exist is refused beside it.
    const since = card.getByLabel('Failed deliveries accepted since');
    const typed = await since.inputValue();
    expect(typed).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$/);
    await since.fill('2026-13-01 10:00');
    await card.getByRole('button', { name: 'Count' }).click();
    await card.getByText(/^Give a time such as \d{4}-\d{2}-\d{2} \d{2}:\d{2}, in your local time\.$/).waitFor();
    expect(await since.getAttribute('aria-invalid')).toBe('true');
    await since.fill(typed);
    await card.getByRole('button', { name: 'Count' }).click();
    await card.getByText(/\d+ failed deliveries since/).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    // The picture starts at the agent's row, above its detail.
    await card.evaluate((tbody) => (tbody as unknown as { scrollIntoView(): void }).scrollIntoView());
    await docsShot('agents-health');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await card.locator('.badge', { hasText: 'Failing since' }).waitFor();
    const [wideAgents, seenAgents] = await pageWidths(page);
    expect(wideAgents).toBeLessThanOrEqual(seenAgents!);
    // Opened, the detail's figures, headers and forms wrap inside the phone's width too.
    await card.getByText("Test event's request and response").click();
    await card.locator('.test-event pre').waitFor();
    const fits = () =>
      page.evaluate(() => {
        const root = (globalThis as unknown as PageGlobals).document.querySelector(':root');
        return root.scrollWidth <= root.clientWidth;
      });
    expect(await fits()).toBe(true);
    await b.screenshot('agents-health-phone');

    // The whole list, on a phone and on a desk: whose webhook is in trouble, and why, reads from
    // the rows alone.
    await page.goto(`${base}/dashboard/agents`);
    await card.locator('.badge', { hasText: 'Failing since' }).waitFor();
    expect(await fits()).toBe(true);
    await page.locator('.agents-table').evaluate((table) => (table as unknown as { scrollIntoView(): void }).scrollIntoView());
    await docsShot('agents-phone');
    await page.setViewportSize({ width: 1100, height: 800 });
    await page.reload();
    await card.locator('.badge', { hasText: 'Failing since' }).waitFor();
    await docsShot('agents');
    await card.getByRole('button', { name: /^Manage/ }).click();
    await card.getByText('Resend failed since…').click();
    await card.getByRole('button', { name: 'Count' }).click();

    // Resending, removing the webhook and archiving ask first in the page's own dialog, which says
    // what will happen; Cancel (focused, so that Enter alone changes nothing) or Escape changes
    // nothing, and the focus returns to the button, or to its section once the button is gone.
    const focused = () =>
      page.evaluate(() => {
        const element = (globalThis as unknown as PageGlobals).document.querySelector(':focus');
        return element ? [element.id, element.textContent] : null;
      });
    const dialog = page.getByRole('dialog');
    const failedSteps = async () => (await stepsOf('invoice-agent')).join();
    const resendButton = card.getByRole('button', { name: /^Resend \d+$/ });
    const resendName = (await resendButton.textContent())!;
    const count = resendName.split(' ')[1]!;
    await resendButton.click();
    expect(await dialog.getByRole('heading').textContent()).toBe(`Resend ${count} Failed deliveries to invoice-agent?`);
    expect(await dialog.locator('p').allTextContents()).toEqual(['Each goes back to Accepted and its doorbell is rung again.']);
    expect(await focused()).toEqual(['', 'Cancel']);
    await page.keyboard.press('Enter');
    await dialog.waitFor({ state: 'detached' });
    expect(await failedSteps()).toBe('failed,failed,failed');
    expect(await focused()).toEqual(['', resendName]);

    const removeWebhook = card.getByRole('button', { name: 'Remove webhook' });
    await removeWebhook.click();
    expect(await dialog.getByRole('heading').textContent()).toBe("Remove invoice-agent's webhook?");
    expect(await dialog.locator('p').allTextContents()).toEqual([
      'Its signing secret is discarded for good: a webhook added later gets a new secret, which its handler must be given.',
      'No more doorbells are sent, not even for deliveries still waiting for one: invoice-agent goes back to polling and finds them in its inbox.',
      'Its health figures are cleared.',
    ]);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect((await h.db.sql`select webhook_url from agents where username = 'invoice-agent'`)[0]!.webhook_url).toBe(handler.url('/hook'));
    expect(await focused()).toEqual(['', 'Remove webhook']);

    // The A2A card: its address, and listing it publicly or not; the page hears the change.
    const a2a = card.locator('section.a2a-card');
    expect(await a2a.locator('code').textContent()).toBe(`${new URL(page.url()).origin}/a2a/agents/invoice-agent/`);
    await a2a.getByRole('button', { name: 'List the card publicly' }).click();
    await a2a.getByText('Listed: anyone may read its card, which names it and how to send it a message.').waitFor();
    expect((await h.db.sql`select a2a_card_listed from agents where username = 'invoice-agent'`)[0]!.a2a_card_listed).toBe(true);
    expect((await h.call('GET', '/a2a/agents/invoice-agent/.well-known/agent-card.json')).status).toBe(200);
    await a2a.getByRole('button', { name: 'Stop listing' }).click();
    await a2a.getByRole('button', { name: 'List the card publicly' }).waitFor();
    expect((await h.call('GET', '/a2a/agents/invoice-agent/.well-known/agent-card.json')).status).toBe(401);

    const archive = card.getByRole('button', { name: 'Archive', exact: true });
    await archive.click();
    expect(await dialog.getByRole('heading').textContent()).toBe('Archive invoice-agent?');
    expect(await dialog.locator('p').allTextContents()).toEqual([
      'Its API key stops working at once, and it receives no new messages: what is posted to its threads while it is archived never reaches it, even once it is unarchived.',
      'No doorbells go to its webhook while it is archived.',
      'Unarchive gives its key back.',
    ]);
    await docsShot('agents-archive-confirm');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    expect((await h.db.sql`select archived_at from agents where username = 'invoice-agent'`)[0]!.archived_at).toBeNull();
    expect(await focused()).toEqual(['', 'Archive']);
    await archive.click();
    await dialog.getByRole('button', { name: 'Archive' }).click();
    await card.locator('.badge', { hasText: 'Archived' }).waitFor();
    expect((await h.db.sql`select archived_at from agents where username = 'invoice-agent'`)[0]!.archived_at).not.toBeNull();
    expect(await focused()).toEqual(['', 'Unarchive']);
    // Unarchiving takes nothing away: no question asked.
    await card.getByRole('button', { name: 'Unarchive' }).click();
    await card.getByRole('button', { name: 'Archive', exact: true }).waitFor();
    expect(await dialog.count()).toBe(0);
    expect((await h.db.sql`select archived_at from agents where username = 'invoice-agent'`)[0]!.archived_at).toBeNull();

    // Switched off by the health sweep, its row turns red and still says why.
    await h.db.sql`
      update agents set webhook_disabled_at = now(), webhook_disabled_reason = 'It answered no attempt with 2xx for 1 hour.',
        webhook_failing_since = (select h.failing_since from endpoint_health h where h.agent_id = agents.id)
      where username = 'invoice-agent'`;
    const switchedOff = card.locator('.badge', { hasText: 'Switched off at' });
    await switchedOff.waitFor();
    expect(await switchedOff.textContent()).toMatch(/^Switched off at \S+ — HTTP 500$/);
    expect(await card.getAttribute('class')).toContain('health-disabled');
    // Its reason, said once (the page adds no second "polls instead" of its own).
    expect(await card.locator('[data-webhook-stopped="disabled"] > p:first-child').textContent()).toMatch(
      /^Switched off at \S+\. It answered no attempt with 2xx for 1 hour\.$/,
    );
    await b.screenshot('agents-switched-off');

    // Without a test event since the switch-off, switching back on asks first; ticked (it is not by
    // default), what failed while it was failing is resent: every delivery its 500s failed, once.
    const failedToIt = () =>
      h.db.sql<{ id: string; step: string; resends: number }[]>`
        select d.id, d.step, d.resends from deliveries d join agents a on a.id = d.recipient_id
        where a.username = 'invoice-agent' and d.step = 'failed' order by d.id`;
    const failedBefore = await failedToIt();
    expect(failedBefore.length).toBeGreaterThan(0);
    const resendBox = card.getByLabel('Also resend what failed while it was failing');
    expect(await resendBox.isChecked()).toBe(false);
    await resendBox.check();
    await card.getByRole('button', { name: 'Switch on without a passing test…' }).click();
    await dialog.getByRole('button', { name: 'Switch on without a passing test' }).click();
    await switchedOff.waitFor({ state: 'detached' });
    expect(await page.locator('#toast.show').textContent()).toBe(`Switched back on; resent ${failedBefore.length}.`);
    const resent = await h.db.sql<{ resends: number }[]>`select resends from deliveries where id = any(${failedBefore.map((d) => d.id)}::uuid[]) order by id`;
    expect(resent.map((d) => d.resends)).toEqual(failedBefore.map((d) => d.resends + 1));
    expect((await h.db.sql`select webhook_disabled_at from agents where username = 'invoice-agent'`)[0]!.webhook_disabled_at).toBeNull();
    expect(await card.getAttribute('class')).not.toContain('health-disabled');
    await b.screenshot('agents-switched-back-on');

    await removeWebhook.click();
    await dialog.getByRole('button', { name: 'Remove webhook' }).click();
    await card.getByRole('button', { name: 'Add webhook' }).waitFor();
    expect((await h.db.sql`select webhook_url, signing_secret from agents where username = 'invoice-agent'`)[0]).toEqual({ webhook_url: null, signing_secret: null });
    await card.getByRole('cell', { name: 'Polling', exact: true }).waitFor();
    expect(await focused()).toEqual(['webhook-heading-invoice-agent', 'Webhook of invoice-agent']);
  } finally {
    await worker.stop();
  }
}, 60_000);
