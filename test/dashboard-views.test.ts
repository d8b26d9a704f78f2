import { expect, test } from 'bun:test';
import type { Route } from 'playwright-core';
import { uniqueName, type TestAgent } from './support/harness';
import { axeViolations, pageWidths, untilCount, useDashboardBrowser, type PageGlobals } from './support/dashboard-browser';

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
const focusedText = () => b.page.evaluate(() => (globalThis as unknown as PageGlobals).document.querySelector(':focus')?.textContent);

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
  // A live change keeps every loaded page, and moves nothing under a reader scrolled down: the two
  // new deliveries wait, counted, until asked for; then there are 122 rows, not 50.
  await page.evaluate(() => (globalThis as unknown as PageGlobals).scrollTo(0, 600));
  const firstShown = await page.locator('[data-delivery]').first().getAttribute('data-delivery');
  await post(writer, threadId, 'one more');
  const waiting = page.getByRole('button', { name: '2 new deliveries — show' });
  await waiting.waitFor();
  expect([await rows(), await page.locator('[data-delivery]').first().getAttribute('data-delivery')]).toEqual([120, firstShown]);
  await waiting.click();
  await untilCount(page, '[data-delivery]', 122);
  expect(await waiting.count()).toBe(0);
  await page.evaluate(() => (globalThis as unknown as PageGlobals).scrollTo(0, 0));

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
  expect(await page.getByLabel('Accepted').inputValue()).toBe('custom');
  expect(await page.getByLabel('From').inputValue()).toBe(minute.replace('T', ' '));
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
  // Asked in the page's own dialog, with Cancel focused: Cancel leaves all six Failed.
  const bulk = page.getByRole('button', { name: 'Resend all Failed in this view…' });
  await bulk.click();
  const dialog = page.getByRole('dialog', { name: 'Resend 6 Failed deliveries?' });
  expect(await dialog.locator('#confirm-body').innerText()).toBe(
    'Each of the 6 Failed deliveries in this view goes back to Accepted and its doorbell is rung again.\n\n' +
      'Deliveries that fail after this count are not included. One that cannot be resent (its recipient archived, say) is left as it is and counted.',
  );
  expect(await focusedText()).toBe('Cancel');
  await page.keyboard.press('Enter');
  await dialog.waitFor({ state: 'detached' });
  expect(await focusedText()).toBe('Resend all Failed in this view…');
  expect((await h.db.sql`select count(*)::int as n from deliveries where step = 'failed'`)[0]!.n).toBe(6);
  await bulk.click();
  await dialog.getByRole('button', { name: 'Resend 6' }).click();
  await page.getByText('Resent 3 of 6. Not resent: 3 because its recipient is archived.').waitFor();
  // The keyboard carries on from the button it pressed.
  expect(await focusedText()).toBe('Resend all Failed in this view…');
  await untilCount(page, '[data-delivery]', 3);
  await page.locator('[data-count="failed"]', { hasText: 'Failed 3' }).waitFor();
  await b.screenshot('deliveries-bulk-resend');
}, 60_000);

test('the live list never moves under its reader: what is open stays, new rows wait to be asked for, focus stays put', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  const writer = await h.agent(uniqueName('still-w'));
  const reader = await h.agent(uniqueName('still-r'));
  const threadId = await h.thread(writer, [reader], 'Holding still');
  const fail = (messageId: string) =>
    h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'gave up' where message_id = ${messageId} returning id`;
  const [a] = await fail((await post(writer, threadId, 'older failure')).id);
  const [bee] = await fail((await post(writer, threadId, 'newer failure')).id);
  await openLive(`/dashboard/deliveries?thread=${threadId}&state=failed`);
  await untilCount(page, '[data-delivery]', 2);
  const row = (id: string) => page.locator(`[data-delivery="${id}"]`);
  const order = () => page.locator('[data-delivery]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-delivery')));

  // At the top with nothing open, a new row simply arrives.
  const [c] = await fail((await post(writer, threadId, 'third failure')).id);
  await untilCount(page, '[data-delivery]', 3);
  expect(await order()).toEqual([c!.id, bee!.id, a!.id]);

  // The person opens the oldest and resends the newest: the resent row leaves the Failed view but
  // stays where it was, marked, and the keyboard focus moves to its Details button.
  await row(a!.id).getByRole('button', { name: /^Details/ }).click();
  await row(c!.id).getByRole('button', { name: 'Resend' }).click();
  await row(c!.id).getByText('No longer in this view: kept while you look at it.').waitFor();
  expect(await order()).toEqual([c!.id, bee!.id, a!.id]);
  expect(await page.evaluate(() => {
    const focused = (globalThis as unknown as PageGlobals).document.querySelector(':focus');
    return [focused?.closest('tbody')?.dataset.delivery, focused?.textContent];
  })).toEqual([
    c!.id,
    `Details of the delivery to ${reader.username}`,
  ]);
  expect((await h.db.sql`select step from deliveries where id = ${c!.id}`)[0]!.step).toBe('accepted');

  // While one is open, new Failed rows wait, counted, above the list.
  const [d] = await fail((await post(writer, threadId, 'fourth failure')).id);
  const waiting = page.getByRole('button', { name: '1 new delivery — show' });
  await waiting.waitFor();
  expect(await order()).toEqual([c!.id, bee!.id, a!.id]);

  // Asked for, they come in; the resent row goes, the open one stays although it left the view too.
  await row(a!.id).getByRole('button', { name: 'Resend' }).click();
  await row(a!.id).getByText('No longer in this view: kept while you look at it.').waitFor();
  await waiting.click();
  await row(d!.id).waitFor();
  expect(await order()).toEqual([d!.id, bee!.id, a!.id]);
  await row(a!.id).getByText('No longer in this view: kept while you look at it.').waitFor();
  expect(await waiting.count()).toBe(0);
  await b.screenshot('deliveries-held');
}, 30_000);

test('the Threads page holds still while a person types in a card: a thread with new activity waits to be asked for', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  const writer = await h.agent(uniqueName('hold-w'));
  const reader = await h.agent(uniqueName('hold-r'));
  const older = await h.thread(writer, [reader], 'Quiet thread');
  const newer = await h.thread(writer, [reader], 'Busy thread');
  await openLive(`/dashboard/threads?q=${writer.username}`);
  const order = () => page.locator('[data-thread]').evaluateAll((cards) => cards.map((c) => c.getAttribute('data-thread')));
  await untilCount(page, '[data-thread]', 2);
  expect(await order()).toEqual([newer, older]);

  const box = page.locator(`[data-thread="${newer}"]`).getByLabel('Post as yourself');
  await box.fill('half-written');
  await post(writer, older, 'news in the quiet thread');
  const waiting = page.getByRole('button', { name: '1 thread with new activity — show' });
  await waiting.waitFor();
  expect([await order(), await box.inputValue()]).toEqual([[newer, older], 'half-written']);
  await waiting.click();
  await page.waitForFunction(
    (first) => (globalThis as unknown as PageGlobals).document.querySelector('[data-thread]')?.getAttribute('data-thread') === first,
    older,
  );
  expect([await order(), await box.inputValue(), await waiting.count()]).toEqual([[older, newer], 'half-written', 0]);
}, 30_000);

test('the time filter is one control: a window ending now, or a range typed in local time, refused when it is not a time', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  const writer = await h.agent(uniqueName('when-w'));
  const reader = await h.agent(uniqueName('when-r'));
  const threadId = await h.thread(writer, [reader], 'Times');
  const old = await post(writer, threadId, 'two hours ago');
  await post(writer, threadId, 'just now');
  await h.db.sql`update deliveries set created_at = now() - interval '2 hours' where message_id = ${old.id}`;
  await openLive(`/dashboard/deliveries?thread=${threadId}`);
  await untilCount(page, '[data-delivery]', 2);

  // From the search box to Apply is five tab stops (two datetime-local inputs made it fourteen more).
  await page.getByLabel('Search').focus();
  const stops: string[] = [];
  for (let i = 0; i < 5; i++) {
    await page.keyboard.press('Tab');
    stops.push(
      await page.evaluate(() => {
        const focused = (globalThis as unknown as PageGlobals).document.querySelector(':focus');
        return focused?.getAttribute('name') ?? focused?.textContent ?? '';
      }),
    );
  }
  expect(stops).toEqual(['state', 'agent', 'when', 'Apply', 'Clear filters']);

  await page.getByLabel('Accepted').selectOption('1h');
  await page.waitForURL(`${b.base}/dashboard/deliveries?thread=${threadId}&within=1h`);
  await untilCount(page, '[data-delivery]', 1);
  await page.reload();
  await untilCount(page, '[data-delivery]', 1);
  expect(await page.getByLabel('Accepted').inputValue()).toBe('1h');

  await page.getByLabel('Accepted').selectOption('custom');
  await page.getByLabel('From').fill('2026-02-30 10:00');
  await page.getByRole('button', { name: 'Apply' }).click();
  const local = await page.evaluate(() => new Date().getFullYear());
  await page.locator('#time-error', { hasText: `From must be a time such as ${local}-` }).waitFor();
  expect(await page.getByLabel('From').getAttribute('aria-invalid')).toBe('true');
  expect(page.url()).toBe(`${b.base}/dashboard/deliveries?thread=${threadId}&within=1h`);

  // Typed times bound the list at either end (a delivery's time is also in its id, which the
  // moved time above does not change: both were accepted just now as far as an upper bound goes).
  const localMinute = (msAgo: number) =>
    page.evaluate((ms) => {
      const at = new Date(Date.now() - ms);
      return new Date(at.getTime() - at.getTimezoneOffset() * 60_000).toISOString().slice(0, 16).replace('T', ' ');
    }, msAgo);
  await page.getByLabel('From').fill(await localMinute(3 * 3_600_000));
  await page.getByRole('button', { name: 'Apply' }).click();
  await page.waitForURL(new RegExp(`thread=${threadId}&from=[^&]+$`));
  await untilCount(page, '[data-delivery]', 2);
  await page.getByLabel('From').fill('');
  await page.getByLabel('To').fill(await localMinute(3_600_000));
  await page.getByRole('button', { name: 'Apply' }).click();
  await page.getByText('No deliveries match these filters.').waitFor();
  expect(await page.locator('#time-error').isVisible()).toBe(false);
}, 30_000);

test('agents and threads a page at a time; a long unbroken goal never pushes a phone screen sideways', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  const opener = await h.agent(uniqueName('opener'));
  for (let i = 0; i < 52; i++) await h.agent(uniqueName('crowd'));
  await openLive('/dashboard/agents');
  // The first page, once it has loaded (the live indicator can come first): exactly 50.
  await page.locator('[data-agent]').nth(49).waitFor();
  expect(await page.locator('[data-agent]').count()).toBe(50);
  // A live refresh still out when the older page comes in must not take that page off again: the
  // refresh (a new agent) is held until the older page is shown, then let through.
  let releaseRefresh = () => {};
  const refreshHeld = new Promise<void>((resolve) => (releaseRefresh = resolve));
  const refreshAsked = Promise.withResolvers<void>();
  let holding = true;
  await page.route(
    (url) => url.pathname === '/dashboard/api/agents' && !url.searchParams.has('after'),
    async (route: Route) => {
      if (holding) {
        holding = false;
        refreshAsked.resolve();
        await refreshHeld;
      }
      await route.continue();
    },
  );
  const latecomer = await h.agent(uniqueName('late'));
  await refreshAsked.promise;
  await page.getByRole('button', { name: 'Show older agents' }).click();
  const oldest = page.locator('[data-agent]').nth(50);
  await oldest.waitFor();
  const oldestName = await oldest.getAttribute('data-agent');
  releaseRefresh();
  await page.locator(`[data-agent="${latecomer.username}"]`).waitFor();
  expect(await page.locator(`[data-agent="${oldestName}"]`).count()).toBe(1);
  await page.unrouteAll();
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
  // Oldest first, as a conversation reads: the new message comes last.
  expect(await page.locator('[data-message]').last().getAttribute('data-message')).toBe(id);
  expect(await page.locator('[data-message]').first().getAttribute('data-message')).not.toBe(id);
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
