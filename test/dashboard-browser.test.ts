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
  await invitePerson(h.db.sql, { email: 'ada@example.com', username: 'ada' });
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

  // Add a webhook to reader: its secret is shown at once and can be revealed later.
  const readerCard = page.locator('[data-agent="reader"]');
  await readerCard.getByLabel('Webhook URL').fill('http://127.0.0.1:9/reader');
  await readerCard.getByRole('button', { name: 'Add webhook' }).click();
  await page.locator('[data-agent="reader"] .secret code', { hasText: 'whsec_' }).waitFor();
  const [stored] = await h.db.sql`select webhook_url, signing_secret from agents where username = 'reader'`;
  expect(stored!.webhook_url).toBe('http://127.0.0.1:9/reader');
  await page.reload();
  await page.locator('[data-agent="reader"]').getByRole('button', { name: 'Reveal secret' }).click();
  await page.locator('[data-agent="reader"] .secret code', { hasText: stored!.signing_secret }).waitFor();
  await docsShot('agents');

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
  const card = page.locator(`[data-thread="${threadId}"]`);
  await card.getByLabel('Post as yourself').fill(EMOJI.repeat(10_000));
  await card.getByLabel('Summary').fill(EMOJI.repeat(201));
  await card.getByRole('button', { name: 'Post', exact: true }).click();
  const error = page.locator(`#post-error-${threadId}`);
  await error.getByText('summary must be at most 200 characters').waitFor();
  expect(await card.getByLabel('Summary').getAttribute('aria-invalid')).toBe('true');
  expect(await card.getByLabel('Summary').getAttribute('aria-describedby')).toBe(`post-error-${threadId}`);
  await card.getByLabel('Summary').fill(EMOJI.repeat(200));
  await card.getByRole('button', { name: 'Post', exact: true }).click();
  await card.getByText('Posted to 2 recipients.').waitFor();
  expect(await error.isVisible()).toBe(false);
  const stored = await h.db.sql`select content, summary from messages where thread_id = ${threadId}`;
  expect([...stored]).toEqual([{ content: EMOJI.repeat(10_000), summary: EMOJI.repeat(200) }]);
  // The thread's own page lists the message with its recipients' steps, live.
  await page.locator('[data-message]').first().getByText(reader!.username).waitFor();
}, 20_000);

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

    // On the Agents page the same webhook reads as failing, with its figures; a test event gets the
    // handler's answer, which arrives over the live stream.
    await page.setViewportSize({ width: 1100, height: 800 });
    await line.getByRole('link', { name: 'invoice-agent' }).click();
    await page.waitForURL(`${base}/dashboard/agents?q=invoice-agent`);
    const card = page.locator('[data-agent="invoice-agent"]');
    await card.locator('.badge', { hasText: 'Failing since' }).waitFor();
    expect(await card.locator('.badge', { hasText: 'Failing since' }).textContent()).toContain('— HTTP 500');
    await page.locator('#live', { hasText: 'Live' }).waitFor();
    await card.getByRole('button', { name: 'Send test event' }).click();
    const outcome = card.locator('[data-test-outcome]');
    await outcome.filter({ hasText: /Sent .* by ada — HTTP 500 in \d+ ms/ }).waitFor();
    await card.getByText("Test event's request and response").click();
    await card.locator('.test-event pre', { hasText: '"error": "down for maintenance"' }).waitFor();
    await card.getByText('Resend failed since…').click();
    await card.getByRole('button', { name: 'Count' }).click();
    await card.getByText(/\d+ failed deliveries since/).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await docsShot('agents-health');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await card.locator('.badge', { hasText: 'Failing since' }).waitFor();
    const [wideAgents, seenAgents] = await pageWidths(page);
    expect(wideAgents).toBeLessThanOrEqual(seenAgents!);
    await b.screenshot('agents-health-phone');
    await page.setViewportSize({ width: 1100, height: 800 });
  } finally {
    await worker.stop();
  }
}, 60_000);
