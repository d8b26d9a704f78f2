import { expect, test } from 'bun:test';
import { Webhook } from 'standardwebhooks';
import { axeViolations, pageWidths, useDashboardBrowser } from './support/dashboard-browser';
import { receiver } from './support/receiver';
import { FAST_WEBHOOKS } from './support/webhooks';

// The Notifications page in a real headless Chromium, with the worker running: a person adds an
// operator webhook (its secret shown once), sends a test notice that a real local receiver gets and
// verifies, sees a failing one's health and attempts, and removes it; usable on a phone, axe clean.
const b = useDashboardBrowser({ ...FAST_WEBHOOKS, OPERATOR_WEBHOOK_RETRY_DELAYS_MS: '60000' }, { width: 1440, height: 900 }, { worker: true });
const good = receiver();
const bad = receiver(() => new Response('channel_not_found', { status: 404 }));

test('a person adds operator webhooks, tests them, reads their health and removes one', async () => {
  const { page, base } = b;
  await b.signIn('notices@example.com', 'noticer');
  await page.goto(`${base}/dashboard/overview`);
  await page.getByRole('link', { name: 'Notifications', exact: true }).click();
  await page.waitForURL(`${base}/dashboard/notifications`);
  await page.getByText('No operator webhook yet').waitFor();
  await page.getByText('Notices carry no link to the dashboard').waitFor();

  // A URL the rules refuse is said beside the field.
  await page.getByLabel('URL').fill('http://user:pw@127.0.0.1:9/x');
  await page.getByRole('button', { name: 'Add webhook' }).click();
  await page.locator('#hook-url-error', { hasText: 'url must not contain credentials' }).waitFor();
  expect(await page.getByLabel('URL').getAttribute('aria-invalid')).toBe('true');

  await page.getByLabel('URL').fill(good.url('/slack'));
  await page.getByRole('button', { name: 'Add webhook' }).click();
  const shown = page.locator('.notice.secret code').last();
  await shown.waitFor();
  const secret = (await shown.textContent())!;
  expect(secret).toMatch(/^whsec_/);
  await page.getByRole('button', { name: 'I have kept it' }).click();
  expect(await page.locator('.notice.secret').count()).toBe(0);

  await page.getByLabel('URL').fill(bad.url('/json'));
  await page.getByLabel(/^JSON/).check();
  await page.getByRole('button', { name: 'Add webhook' }).click();
  await page.locator('.notice.secret').waitFor();
  await page.getByRole('button', { name: 'I have kept it' }).click();
  await page.getByRole('heading', { name: '2 webhooks' }).waitFor();

  const slackCard = page.locator('.operator-webhook', { hasText: good.url('/slack') });
  const jsonCard = page.locator('.operator-webhook', { hasText: bad.url('/json') });
  expect(await slackCard.locator('.badge').allTextContents()).toEqual(['Slack', 'Untried']);
  expect(await jsonCard.locator('.badge').allTextContents()).toEqual(['JSON', 'Untried']);

  await slackCard.getByRole('button', { name: 'Send a test notice' }).click();
  await good.waitFor(1);
  const got = new Webhook(secret).verify(good.received[0]!.raw, Object.fromEntries(good.received[0]!.headers)) as { text: string };
  expect(got.text).toStartWith('Test notice: noticer sent this test notice at ');
  await slackCard.locator('.badge', { hasText: 'Healthy' }).waitFor();
  await slackCard.getByText('Answering: the last notice was delivered').waitFor();

  await jsonCard.getByRole('button', { name: 'Send a test notice' }).click();
  await jsonCard.locator('.badge', { hasText: 'Failing' }).waitFor();
  await jsonCard.getByText('the handler answered HTTP 404').waitFor();
  await jsonCard.getByText('1 notice waiting to be sent or retried.').waitFor();
  await jsonCard.getByText('Last 1 attempt').click();
  expect(await jsonCard.locator('.notice-attempts tbody td').allTextContents()).toEqual([
    expect.any(String),
    'Test notice',
    expect.stringMatching(/^HTTP 404 in \d+ mschannel_not_found$/),
    'Failed, retried',
  ]);
  await b.screenshot('notifications');
  expect(await axeViolations(page)).toEqual([]);

  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await page.locator('.operator-webhook').first().waitFor();
  await page.locator('.operator-webhook', { hasText: bad.url('/json') }).getByText('Last 1 attempt').click();
  const [scrollWidth, clientWidth] = await pageWidths(page);
  expect(scrollWidth).toBe(clientWidth);
  await b.screenshot('notifications-phone');
  expect(await axeViolations(page)).toEqual([]);
  await page.setViewportSize({ width: 1440, height: 900 });

  await page.locator('.operator-webhook', { hasText: bad.url('/json') }).getByRole('button', { name: 'Remove' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Remove webhook' }).click();
  await page.getByRole('heading', { name: '1 webhook' }).waitFor();
  const [row] = await b.h.db.sql`select action, actor from audit_events where action = 'operator_webhook.remove'`;
  expect(row).toEqual({ action: 'operator_webhook.remove', actor: 'noticer' });
});
