import { expect, test } from 'bun:test';
import { uniqueName, type TestAgent } from './support/harness';
import { useDashboardBrowser, type PageGlobals } from './support/dashboard-browser';

// The dashboard under steady traffic, in a real headless Chromium: what a person sees while
// agents keep posting. Notified deliveries read as stalled after 3 s here.
const STALLED_AFTER_MS = 3_000;
const b = useDashboardBrowser({ STALLED_AFTER_MS: String(STALLED_AFTER_MS) });
const { h } = b;

async function pair(title: string): Promise<{ writer: TestAgent; reader: TestAgent; threadId: string }> {
  const writer = await h.agent(uniqueName('writer'));
  const reader = await h.agent(uniqueName('reader'));
  return { writer, reader, threadId: await h.thread(writer, [reader], title) };
}

const post = async (writer: TestAgent, threadId: string, content: string) =>
  (await b.agentCall('POST', `/api/threads/${threadId}/messages`, writer.key, { content })).data as { id: string };

// Records, in the page, when each element carrying `attribute` first appears (the page's clock and
// the test's are the machine's one clock).
async function watchArrivals(attribute: string) {
  await b.page.evaluate((name) => {
    const w = globalThis as unknown as PageGlobals;
    const seen: Record<string, number> = {};
    w.arrivals = seen;
    const look = () => {
      for (const el of w.document.querySelectorAll(`[${name}]`)) seen[el.getAttribute(name)] ??= Date.now();
    };
    new w.MutationObserver(look).observe(w.document.querySelector('#app'), { childList: true, subtree: true, attributes: true });
    look();
  }, attribute);
}
const arrivals = () => b.page.evaluate(() => (globalThis as unknown as PageGlobals).arrivals as Record<string, number>);

async function openLive(path: string) {
  await b.page.goto(`${b.base}${path}`);
  await b.page.locator('#live', { hasText: 'Live' }).waitFor();
}

test('a post every 200 ms for 10 s: each appears on the open Deliveries page within 1 s', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { writer, threadId } = await pair('Steady stream');
  await openLive('/dashboard/deliveries');
  await watchArrivals('data-message');
  const sent: { id: string; at: number }[] = [];
  const start = Date.now();
  for (let i = 0; i < 50; i++) {
    await Bun.sleep(Math.max(0, start + i * 200 - Date.now()));
    const at = Date.now();
    sent.push({ id: (await post(writer, threadId, `steady ${i}`)).id, at });
  }
  await Bun.sleep(1_000);
  const seen = await arrivals();
  const late = sent.map(({ id, at }) => ({ id, after: seen[id] === undefined ? null : seen[id]! - at })).filter((p) => p.after === null || p.after >= 1_000);
  expect(late).toEqual([]);
}, 30_000);

test('with the Failed filter open and steady healthy traffic, a failure appears within 1 s', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { writer, threadId } = await pair('Mostly healthy');
  await openLive('/dashboard/deliveries?state=failed');
  await b.page.getByText('No deliveries match these filters.').waitFor();
  await watchArrivals('data-delivery');
  let failedAt = 0;
  let failing = '';
  for (let i = 0; i < 25; i++) {
    const { id } = await post(writer, threadId, `healthy ${i}`);
    if (i === 12) {
      failing = (await h.db.sql`select id from deliveries where message_id = ${id}`)[0]!.id;
      failedAt = Date.now();
      await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'gave up' where id = ${failing}`;
    }
    await Bun.sleep(220);
  }
  const seen = await arrivals();
  expect(Object.keys(seen)).toEqual([failing]);
  expect(seen[failing]! - failedAt).toBeLessThan(1_000);
}, 30_000);

test('a Notified delivery turns Stalled on the page when its time comes, with no change in the database', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { writer, threadId } = await pair('Slow handler');
  const { id: messageId } = await post(writer, threadId, 'answered, never reported');
  await openLive('/dashboard/deliveries');
  const row = b.page.locator(`[data-message="${messageId}"]`);
  await row.waitFor();
  const notifiedAt = Date.now();
  await h.db.sql`update deliveries set step = 'notified', notified_at = now() where message_id = ${messageId}`;
  await row.locator('.badge', { hasText: 'Notified' }).waitFor();
  await row.locator('.badge', { hasText: 'Stalled' }).waitFor({ timeout: STALLED_AFTER_MS + 5_000 });
  const after = Date.now() - notifiedAt;
  expect(after).toBeGreaterThanOrEqual(STALLED_AFTER_MS);
  // Seen within a second and a half of turning Stalled, not on a refresh a minute away.
  expect(after).toBeLessThan(STALLED_AFTER_MS + 1_500);
  await b.page.locator('[data-count="stalled"]', { hasText: 'Stalled 1' }).waitFor({ timeout: 1_500 });
}, 30_000);

test('live updates and refreshes leave an open attempt log open and typed text in place', async () => {
  await b.signIn('ada@example.com', 'ada');
  const { page } = b;
  const { writer, threadId } = await pair('Kept open');
  const { id: messageId } = await post(writer, threadId, 'look at my attempts');
  const deliveryId: string = (await h.db.sql`select id from deliveries where message_id = ${messageId}`)[0]!.id;
  await h.db.sql`insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status, response_body) values (${deliveryId}, 1, 1, 20, 503, 'busy')`;
  await openLive('/dashboard/deliveries');
  const row = page.locator(`[data-delivery="${deliveryId}"]`);
  await row.getByRole('button', { name: /^Details/ }).click();
  await row.locator('.attempts > summary').click();
  await row.locator('.attempt-detail > summary').click();
  await page.getByLabel('Search').fill('not submitted yet');
  // The delivery itself changes (replaced in place) and new ones arrive (the list is read again).
  await h.db.sql`insert into delivery_attempts (delivery_id, publish, attempt, duration_ms, status) values (${deliveryId}, 1, 2, 20, 503)`;
  await h.db.sql`update deliveries set next_attempt_at = now() + interval '1 minute' where id = ${deliveryId}`;
  await row.getByText('Attempt log (2)').waitFor();
  // With a delivery open, new ones wait above the list until asked for; then they come in.
  for (let i = 0; i < 3; i++) await post(writer, threadId, `more ${i}`);
  await page.getByRole('button', { name: '3 new deliveries — show' }).click();
  for (let i = 0; i < 3; i++) await page.locator('[data-delivery] .summary', { hasText: `more ${i}` }).waitFor();
  await Bun.sleep(600);
  expect(await row.locator('.attempts').getAttribute('open')).toBe('');
  expect(await row.locator('.attempt-detail').first().getAttribute('open')).toBe('');
  expect(await row.locator('.attempt-detail').first().textContent()).toContain('busy');
  expect(await page.getByLabel('Search').inputValue()).toBe('not submitted yet');

  // A post box on the Threads page keeps its text while other threads open and close around it.
  await openLive('/dashboard/threads');
  const box = page.locator(`[data-thread="${threadId}"]`).getByLabel('Post as yourself');
  await box.fill('half-written reply');
  const other = await pair('Opened meanwhile');
  // Typing in a card holds the list still: the new thread waits until asked for.
  await page.getByRole('button', { name: '1 thread with new activity — show' }).click();
  await page.locator(`[data-thread="${other.threadId}"]`).waitFor();
  await b.agentCall('POST', `/api/threads/${other.threadId}/close`, other.writer.key);
  await page.locator(`[data-thread="${other.threadId}"] .badge`, { hasText: 'Close requested' }).waitFor();
  expect(await box.inputValue()).toBe('half-written reply');

  // A webhook field on the Agents page keeps its text while agents are registered around it.
  await openLive('/dashboard/agents');
  await page.locator(`[data-agent="${other.reader.username}"]`).getByRole('button', { name: /^Manage/ }).click();
  const field = page.locator(`[data-agent="${other.reader.username}"]`).getByLabel('Webhook URL');
  await field.fill('https://hooks.example.com/half');
  const newcomer = await h.agent(uniqueName('newcomer'));
  await page.locator(`[data-agent="${newcomer.username}"]`).waitFor();
  expect(await field.inputValue()).toBe('https://hooks.example.com/half');
}, 40_000);
