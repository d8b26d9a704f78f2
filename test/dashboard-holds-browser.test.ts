import { expect, test } from 'bun:test';
import { axeViolations, useDashboardBrowser } from './support/dashboard-browser';

// A person decides on held messages from the Overview in a real headless Chromium: what waits
// arrives live at the top of the page with why it waits, one is approved and reaches its
// recipients, one is rejected with a reason, and the count in the navigation follows. Screenshots
// at desktop and phone size go to test-artifacts/dashboard.
const b = useDashboardBrowser({}, { width: 1280, height: 800 });
const { h } = b;

test('a person approves one held message and rejects another from the Overview', async () => {
  const { page, base } = b;
  await b.signIn('ada@example.com', 'ada');
  const keys: Record<string, string> = {};
  for (const username of ['drafter', 'reviewer', 'looper']) {
    const res = await fetch(`${base}/dashboard/api/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-requested-with': 'fetch', cookie: await cookieHeader() },
      body: JSON.stringify({ username }),
    });
    keys[username] = ((await res.json()) as { data: { apiKey: string } }).data.apiKey;
  }
  const thread = await b.agentCall('POST', '/api/threads', keys.drafter!, { title: 'Customer reply', participantUsernames: ['reviewer'] });
  const threadId = thread.data.id as string;
  await b.agentCall('POST', `/api/threads/${threadId}/messages`, keys.reviewer!, { content: 'Can you draft the answer to ACME?' });
  await h.db.sql`update agents set holds_messages = true where username = 'drafter'`;
  const loop = await b.agentCall('POST', '/api/threads', keys.looper!, { title: 'Status ping-pong', participantUsernames: ['reviewer'] });
  await h.db.sql`update threads set paused_at = now() where id = ${loop.data.id}`;

  await page.goto(`${base}/dashboard/overview`);
  await page.locator('#live', { hasText: 'Live' }).waitFor();
  const waitingCount = page.locator('[data-count="waiting"] b');
  expect(await waitingCount.textContent()).toBe('0');
  // A paused thread shows as a red card at the top, linking to the thread.
  await page.locator(`[data-paused="${loop.data.id}"]`).getByRole('link', { name: 'Status ping-pong' }).first().waitFor();

  // Held while the page is open: the messages arrive without a reload.
  const post = (content: string, summary?: string) =>
    b.agentCall('POST', `/api/threads/${threadId}/messages`, keys.drafter!, { content, ...(summary ? { summary } : {}) });
  const good = await post('Dear ACME,\n\nThank you for your patience. The fix ships on Monday.\n\nBest regards', 'Reply to ACME: the fix ships Monday');
  const bad = await post('ACME, your account is closed. Pay the invoice now.');
  expect([good.data.held.reason, bad.data.held.reason]).toEqual(['agent', 'agent']);
  const goodCard = page.locator(`[data-held="${good.data.id}"]`);
  const badCard = page.locator(`[data-held="${bad.data.id}"]`);
  await goodCard.waitFor();
  await badCard.waitFor();
  await page.locator('[data-count="waiting"] b', { hasText: '2' }).waitFor();
  // Who to whom, why, the thread and what came before.
  await goodCard.getByRole('heading', { name: 'drafter to reviewer' }).waitFor();
  await goodCard.getByText('Agent held').waitFor();
  await goodCard.getByRole('link', { name: 'Customer reply' }).waitFor();
  await goodCard.getByText('Can you draft the answer to ACME?').waitFor();
  await goodCard.getByText('Full message').click();
  await goodCard.getByText('Thank you for your patience.').waitFor();
  // At the top, under the day's headline figures alone (which count what waits, linking here).
  expect(await page.locator('#waiting').evaluate((el) => el.previousElementSibling?.classList.contains('headline') && el === el.parentElement!.querySelectorAll(':scope > section')[1])).toBe(true);
  expect(await page.locator('[data-headline="holds"] .big a').textContent()).toBe('2');
  expect(await axeViolations(page)).toEqual([]);
  await b.screenshot('holds-desktop');
  await page.setViewportSize({ width: 390, height: 844 });
  await b.screenshot('holds-phone');
  await page.setViewportSize({ width: 1280, height: 800 });
  // Where an email's link lands: the message's card, focused; a spent link says so above the list.
  await page.goto(`${base}/dashboard/overview#hold-${bad.data.id}`);
  await page.waitForFunction(`document.activeElement?.id === 'hold-${bad.data.id}'`);
  await page.goto(`${base}/dashboard/overview?link=spent`);
  await page.getByText('That link was used before, or its message was decided or expired meanwhile').waitFor();
  await goodCard.waitFor();

  await goodCard.getByRole('button', { name: 'Approve', exact: true }).click();
  await goodCard.waitFor({ state: 'detached' });
  const delivered = await h.db.sql`
    select a.username from deliveries d join agents a on a.id = d.recipient_id where d.message_id = ${good.data.id}`;
  expect(delivered.map((r) => r.username)).toEqual(['reviewer']);

  // Rejecting asks for the reason the sender is told; without one nothing is sent.
  await badCard.getByRole('button', { name: 'Reject…' }).click();
  const reason = badCard.getByLabel('Why is it rejected? drafter is told.');
  await reason.waitFor();
  await badCard.getByRole('button', { name: 'Reject', exact: true }).click();
  expect(await reason.evaluate((el) => (el as unknown as { validity: { valueMissing: boolean } }).validity.valueMissing)).toBe(true);
  expect((await h.db.sql`select state from held_messages where id = ${bad.data.id}`)[0]!.state).toBe('held');
  await reason.fill('Never threaten a customer.');
  expect(await axeViolations(page)).toEqual([]);
  await b.screenshot('holds-rejecting');
  await badCard.getByRole('button', { name: 'Reject', exact: true }).click();
  await badCard.waitFor({ state: 'detached' });
  const [rejected] = await h.db.sql`select state, rejection_reason, decided_by_name from held_messages where id = ${bad.data.id}`;
  expect(rejected).toEqual({ state: 'rejected', rejection_reason: 'Never threaten a customer.', decided_by_name: 'ada' });
  expect((await h.db.sql`select count(*)::int as n from deliveries where message_id = ${bad.data.id}`)[0]!.n).toBe(0);
  await page.locator('[data-count="waiting"] b', { hasText: '0' }).waitFor();
  // The paused thread's card stays until a person resumes the thread.
  await page.locator(`[data-paused="${loop.data.id}"]`).waitFor();
  await b.screenshot('holds-decided');
});

async function cookieHeader() {
  const cookies = await b.context.cookies(`${b.base}/dashboard/`);
  return cookies.map((c) => `${c.name}=${c.value}`).join('; ');
}
