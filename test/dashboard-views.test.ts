import { expect, test } from 'bun:test';
import type { Route } from 'playwright-core';
import { uniqueName, type TestAgent } from './support/harness';
import { axeViolations, pageWidths, untilCount, useDashboardBrowser } from './support/dashboard-browser';

// The dashboard's views at hundreds of deliveries, and what each shows when something goes wrong,
// in a real headless Chromium.
const b = useDashboardBrowser();
const { h } = b;

const post = async (writer: TestAgent, threadId: string, content: string) =>
  (await b.agentCall('POST', `/api/threads/${threadId}/messages`, writer.key, { content })).data as { id: string; createdAt: string };

async function openLive(path: string) {
  await b.page.goto(`${b.base}${path}`);
  await b.page.locator('#live', { hasText: 'Live' }).waitFor();
}

const rows = () => b.page.locator('[data-delivery]').count();

// Answers every GET of the dashboard API list at `path` with `status` while `failing.on` is set.
async function failList(path: string, status: number, body: string) {
  const failing = { on: true };
  await b.page.route(
    (url) => url.pathname === `/dashboard/api${path}`,
    (route: Route) => (failing.on ? route.fulfill({ status, contentType: status === 500 ? 'text/html' : 'application/json', body }) : route.continue()),
  );
  return failing;
}

test('a first load that fails says so with a way to try again, and the live view starts regardless', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  const writer = await h.agent(uniqueName('w'));
  const reader = await h.agent(uniqueName('r'));
  const threadId = await h.thread(writer, [reader], 'Comes back');

  const deliveries = await failList('/deliveries', 503, JSON.stringify({ success: false, error: 'The database is unavailable; try again shortly.' }));
  await openLive('/dashboard/deliveries');
  await page.getByRole('alert').getByText('Could not load the deliveries: The database is unavailable; try again shortly.').waitFor();
  await b.screenshot('deliveries-load-failed');
  // Once the service answers again, the next change arrives by itself through the live view.
  deliveries.on = false;
  const { id } = await post(writer, threadId, 'after the outage');
  await page.locator(`[data-message="${id}"]`).waitFor();
  expect(await page.getByText('Could not load the deliveries').count()).toBe(0);
  await page.unrouteAll();

  // A 500 without an envelope is put in words; Try again reads the list again.
  const threads = await failList('/threads', 500, '<html>Internal Server Error</html>');
  await openLive('/dashboard/threads');
  await page.getByText('Could not load the threads: The service answered HTTP 500 without saying why; try again in a moment.').waitFor();
  threads.on = false;
  await page.getByRole('button', { name: 'Try again' }).click();
  await page.locator(`[data-thread="${threadId}"]`).waitFor();
  await page.unrouteAll();

  const agents = await failList('/agents', 503, JSON.stringify({ success: false, error: 'The database is unavailable; try again shortly.' }));
  await openLive('/dashboard/agents');
  await page.getByText('Could not load the agents: The database is unavailable; try again shortly.').waitFor();
  agents.on = false;
  await page.getByRole('button', { name: 'Try again' }).click();
  await page.locator(`[data-agent="${writer.username}"]`).waitFor();
  await page.unrouteAll();

  // While a list loads it says so.
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  await page.route((url) => url.pathname === '/dashboard/api/threads', async (route: Route) => {
    await held;
    await route.continue();
  });
  await page.goto(`${b.base}/dashboard/threads`);
  await page.getByRole('status').getByText('Loading threads…').waitFor();
  release();
  await page.locator(`[data-thread="${threadId}"]`).waitFor();
  await page.unrouteAll();
}, 40_000);

test('an action the network refuses says so in words, next to it', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  const writer = await h.agent(uniqueName('w'));
  const reader = await h.agent(uniqueName('r'));
  const threadId = await h.thread(writer, [reader], 'Offline post');
  await openLive(`/dashboard/threads/${threadId}`);
  await page.route((url) => url.pathname === `/dashboard/api/threads/${threadId}/messages`, (route: Route) =>
    route.request().method() === 'POST' ? route.abort('internetdisconnected') : route.continue(),
  );
  await page.getByLabel('Post as yourself').fill('into the void');
  await page.getByRole('button', { name: 'Post', exact: true }).click();
  await page.locator(`#post-error-${threadId}`, { hasText: 'Could not reach the service: check the connection, then try again.' }).waitFor();
  expect(await page.getByText('Failed to fetch').count()).toBe(0);
  expect(await page.getByLabel('Post as yourself').inputValue()).toBe('into the void');
  await page.unrouteAll();
}, 20_000);

test('hundreds of deliveries: a page at a time, counted, searched, by time, and Failed ones resent in bulk', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  const writer = await h.agent(uniqueName('bulk-w'));
  const readers = [await h.agent(uniqueName('bulk-a')), await h.agent(uniqueName('bulk-b'))];
  const threadId = await h.thread(writer, readers, 'Busy thread');
  // 120 deliveries: 60 messages to two recipients each.
  const messages: { id: string; createdAt: string }[] = [];
  for (let i = 0; i < 60; i++) messages.push(await post(writer, threadId, `message number ${i}`));
  await openLive(`/dashboard/deliveries?thread=${threadId}`);
  await page.locator('.chip', { hasText: 'Thread: Busy thread' }).waitFor();
  expect(await rows()).toBe(50);
  await page.getByRole('button', { name: 'Show older deliveries' }).click();
  await untilCount(page, '[data-delivery]', 100);
  await page.getByRole('button', { name: 'Show older deliveries' }).click();
  await untilCount(page, '[data-delivery]', 120);
  expect(await page.getByRole('button', { name: 'Show older deliveries' }).count()).toBe(0);
  // A live change keeps every loaded page: one more message makes 122 rows, not 50.
  await post(writer, threadId, 'one more');
  await untilCount(page, '[data-delivery]', 122);

  // Search by message id, by text, by agent.
  const onlyMessage = async (id: string) => {
    await untilCount(page, `[data-message="${id}"]`, 2);
    await untilCount(page, '[data-delivery]', 2);
  };
  await page.getByLabel('Search').fill(messages[7]!.id);
  await page.getByRole('button', { name: 'Apply' }).click();
  await onlyMessage(messages[7]!.id);
  await page.getByLabel('Search').fill('message number 42');
  await page.getByRole('button', { name: 'Apply' }).click();
  await onlyMessage(messages[42]!.id);
  await page.getByLabel('Search').fill('');
  await page.getByLabel('Recipient').fill(readers[1]!.username);
  await page.getByRole('button', { name: 'Apply' }).click();
  await untilCount(page, '[data-delivery]', 50);
  expect(new Set(await page.locator('[data-label="Recipient"]').allTextContents())).toEqual(new Set([`${readers[1]!.username} (polling)`]));

  // A time range, kept in the address to the millisecond (the inputs show it to the minute, in
  // the page's local time): from the 50th message on, then up to the 10th.
  await page.getByLabel('Recipient').fill('');
  const range = async (query: string, count: number) => {
    await page.goto(`${b.base}/dashboard/deliveries?thread=${threadId}&${query}`);
    await untilCount(page, '[data-delivery]', count);
  };
  await range(`from=${messages[50]!.createdAt}`, 22);
  const at = new Date(messages[50]!.createdAt);
  const minute = new Date(at.getTime() - at.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
  expect(await page.getByLabel('From').inputValue()).toBe(minute);
  await range(`to=${messages[9]!.createdAt}`, 20);
  expect(await page.locator('[data-delivery]').last().getAttribute('data-message')).toBe(messages[0]!.id);
  await page.getByRole('button', { name: 'Clear filters' }).click();
  await page.waitForURL(`${b.base}/dashboard/deliveries`);

  // Bulk resend of the Failed ones in view, confirmed with their count; one recipient cannot be
  // reached (archived) and is told apart.
  await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'gave up'
                 where message_id = any(${messages.slice(0, 3).map((m) => m.id)}::uuid[])`;
  await h.db.sql`update agents set archived_at = now() where username = ${readers[0]!.username}`;
  await page.locator('[data-count="failed"]', { hasText: 'Failed 6' }).waitFor();
  await page.locator('[data-count="failed"]').click();
  await page.waitForURL(`${b.base}/dashboard/deliveries?state=failed`);
  await untilCount(page, '[data-delivery]', 6);
  const asked: string[] = [];
  page.once('dialog', (dialog) => void asked.push(dialog.message()));
  await page.getByRole('button', { name: 'Resend all Failed in this view…' }).click();
  await page.getByText('Resent 3 of 6. Not resent: 3 because its recipient is archived.').waitFor();
  expect(asked).toEqual(['Resend the 6 Failed deliveries in this view? Each goes back to Accepted and its doorbell is rung again.']);
  await untilCount(page, '[data-delivery]', 3);
  await page.locator('[data-count="failed"]', { hasText: 'Failed 3' }).waitFor();
  await b.screenshot('deliveries-bulk-resend');
}, 60_000);

test('agents and threads a page at a time; a long unbroken goal never pushes a phone screen sideways', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  const opener = await h.agent(uniqueName('opener'));
  for (let i = 0; i < 52; i++) await h.agent(uniqueName('crowd'));
  await openLive('/dashboard/agents');
  expect(await page.locator('[data-agent]').count()).toBe(50);
  await page.getByRole('button', { name: 'Show older agents' }).click();
  await page.locator('[data-agent]').nth(50).waitFor();
  await page.getByLabel('Name contains').fill(opener.username);
  await page.getByRole('button', { name: 'Find' }).click();
  await untilCount(page, '[data-agent]', 1);

  const goal = 'x'.repeat(1_900);
  const res = await b.agentCall('POST', '/api/threads', opener.key, { title: `A${'b'.repeat(150)}`, goal });
  expect(res.success).toBe(true);
  await page.setViewportSize({ width: 390, height: 844 });
  try {
    for (const path of ['/dashboard/threads', `/dashboard/threads/${res.data.id}`, '/dashboard/deliveries', '/dashboard/agents']) {
      await openLive(path);
      await page.locator('.placeholder, [data-thread], [data-delivery], [data-agent]').first().waitFor();
      const [wide, seen] = await pageWidths(page);
      expect([path, wide]).toEqual([path, seen]);
    }
    await b.screenshot('thread-phone');
  } finally {
    await page.setViewportSize({ width: 1100, height: 800 });
  }
}, 40_000);

test("a thread's own page: its messages with each recipient's step, live, and the close request decided there", async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  const writer = await h.agent(uniqueName('tw'));
  const reader = await h.agent(uniqueName('tr'), { webhookUrl: 'http://127.0.0.1:9/tr' });
  const threadId = await h.thread(writer, [reader], 'Thread view');
  await post(writer, threadId, 'first words');
  await openLive(`/dashboard/threads/${threadId}`);
  await page.getByRole('heading', { level: 1, name: 'Thread view' }).waitFor();
  const first = page.locator('[data-message]').first();
  await first.getByText('first words').waitFor();
  await first.locator('.badge', { hasText: 'Accepted' }).waitFor();
  const { id } = await post(writer, threadId, 'second words\nover two lines');
  const second = page.locator(`[data-message="${id}"]`);
  await second.waitFor();
  expect(await page.locator('[data-message]').first().getAttribute('data-message')).toBe(id);
  await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'no' where message_id = ${id}`;
  await second.locator('.badge', { hasText: 'Failed' }).waitFor();
  await b.agentCall('POST', `/api/threads/${threadId}/close`, writer.key);
  await page.getByText(`${writer.username} asked to close this thread.`).waitFor();
  await b.screenshot('thread');
  if (process.env.UPDATE_SCREENSHOTS === '1') await page.screenshot({ path: 'docs/screenshots/thread.png' });
  await page.getByRole('button', { name: 'Decline' }).click();
  await page.locator(`[data-thread="${threadId}"] .badge`, { hasText: 'Open' }).waitFor();
  // The recipient links to its delivery, found by id on the Deliveries page.
  await second.getByRole('link', { name: reader.username }).click();
  await untilCount(page, '[data-delivery]', 1);
}, 30_000);

test('no page breaks an accessibility rule axe-core checks, heading order included', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  const writer = await h.agent(uniqueName('axe-w'));
  const reader = await h.agent(uniqueName('axe-r'), { webhookUrl: 'http://127.0.0.1:9/axe' });
  const threadId = await h.thread(writer, [reader], 'Accessible');
  const { id } = await post(writer, threadId, 'checked by axe');
  const [delivery] = await h.db.sql`select d.id from deliveries d where d.message_id = ${id}`;
  await h.db.sql`insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status, response_body) values (${delivery!.id}, 1, 1, 20, 503, 'busy')`;
  await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'gave up' where id = ${delivery!.id}`;
  await b.agentCall('POST', `/api/threads/${threadId}/close`, writer.key);

  const views: [string, () => Promise<unknown>][] = [
    ['/dashboard/deliveries', async () => {
      const row = page.locator(`[data-delivery="${delivery!.id}"]`);
      await row.getByRole('button', { name: /^Details/ }).click();
      await row.locator('.attempts > summary').click();
      await row.locator('.attempt-detail > summary').click();
    }],
    ['/dashboard/deliveries?state=stalled', () => page.getByText('No deliveries match these filters.').waitFor()],
    ['/dashboard/threads', () => page.locator(`[data-thread="${threadId}"]`).waitFor()],
    [`/dashboard/threads/${threadId}`, () => page.locator('[data-message]').first().waitFor()],
    ['/dashboard/agents', () => page.locator(`[data-agent="${reader.username}"]`).waitFor()],
  ];
  for (const [path, ready] of views) {
    await openLive(path);
    await ready();
    expect([path, await axeViolations(b.page)]).toEqual([path, []]);
  }
  await b.context.clearCookies();
  await page.goto(`${b.base}/dashboard/sign-in`);
  expect(['sign-in', await axeViolations(b.page)]).toEqual(['sign-in', []]);
}, 40_000);
