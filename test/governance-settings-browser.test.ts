import { expect, test } from 'bun:test';
import { axeViolations, pageWidths, useDashboardBrowser } from './support/dashboard-browser';

// A person sets an agent's sending and a thread's holds on the dashboard, and resumes a thread the
// loop breaker paused, in a real headless Chromium against the real server; at desktop and phone size.
const b = useDashboardBrowser({ SEND_MESSAGES_PER_MINUTE: '120', SEND_THREADS_PER_HOUR: '0', LOOP_BREAKER_MESSAGES: '40', LOOP_BREAKER_WINDOW_MINUTES: '5' });
const { h } = b;
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1100, height: 800 };

// A passing notice would cover part of the picture.
async function shotAt(name: string) {
  await b.page.locator('#toast:not(.show)').waitFor({ state: 'attached' });
  await b.screenshot(name);
}

test("a person sets an agent's quotas and holds its messages", async () => {
  const { page, base } = b;
  await b.signIn('ada@example.com', 'ada');
  await h.agent('planner');
  await page.goto(`${base}/dashboard/agents?q=planner`);
  const row = page.locator('[data-agent="planner"]');
  const panel = row.locator('section.sending');
  await panel.getByText('planner may send at most 120 messages a minute (the deployment\'s default) and open any number of new threads an hour (the deployment\'s default: no quota)').waitFor();
  expect(await panel.getByLabel('Messages per minute').getAttribute('placeholder')).toBe('Default: 120');

  await panel.getByLabel('Messages per minute').fill('12');
  await panel.getByRole('button', { name: 'Save quotas' }).click();
  await panel.getByText('planner may send at most 12 messages a minute (its own quota)').waitFor();
  const [stored] = await h.db.sql`select messages_per_minute, threads_per_hour, holds_messages from agents where username = 'planner'`;
  expect({ ...stored }).toEqual({ messages_per_minute: 12, threads_per_hour: null, holds_messages: false });

  const holds = panel.getByRole('switch', { name: 'Its messages wait for approval' });
  expect(await holds.isChecked()).toBe(false);
  await holds.check();
  await panel.getByText('Each message planner sends is held until a person approves it').waitFor();
  const [held] = await h.db.sql`select holds_messages from agents where username = 'planner'`;
  expect(held!.holds_messages).toBe(true);
  expect((await h.db.sql`select action, actor from audit_events where subject = 'planner' and action <> 'agent.create' order by id`).map((r) => [r.action, r.actor])).toEqual([
    ['agent.quotas.set', 'ada'],
    ['agent.holds.set', 'ada'],
  ]);

  // A change made elsewhere (the CLI) shows without a reload.
  await h.db.sql`update agents set messages_per_minute = null where username = 'planner'`;
  await panel.getByText('planner may send at most 120 messages a minute (the deployment\'s default)').waitFor();
  expect(await panel.getByLabel('Messages per minute').inputValue()).toBe('');

  expect(await axeViolations(page)).toEqual([]);
  await shotAt('governance-agent-sending');
  await page.setViewportSize(PHONE);
  const [scroll, client] = await pageWidths(page);
  expect(scroll).toBe(client);
  await shotAt('governance-agent-sending-phone');
  await page.setViewportSize(DESKTOP);
});

test('a thread waits for approval, is paused by the loop breaker, and is resumed', async () => {
  const { page, base } = b;
  await b.signIn('ada@example.com', 'ada');
  const writer = await h.agent('writer');
  await h.agent('reviewer');
  const opened = await b.agentCall('POST', '/api/threads', writer.key, { title: 'Release notes', participantUsernames: ['reviewer'] });
  const threadId = opened.data.id as string;
  await page.goto(`${base}/dashboard/threads/${threadId}`);
  const holds = page.getByRole('switch', { name: 'Messages here wait for approval' });
  await holds.waitFor();
  expect(await page.locator('.paused').count()).toBe(0);
  await holds.check();
  await page.getByText("Every agent's message in this thread is held until a person approves it").waitFor();
  const [held] = await h.db.sql`select holds_messages from threads where id = ${threadId}`;
  expect(held!.holds_messages).toBe(true);

  // What the loop breaker writes when it trips: the open page shows it at once.
  await h.db.sql`update threads set paused_at = now() where id = ${threadId}`;
  const banner = page.locator('.paused');
  await banner.getByText("its agents exchanged more than 40 messages in 5 minutes with no person's message.").waitFor();
  await banner.getByText('Paused by the loop breaker at').waitFor();
  // What the writer posts now waits, and the page says so, with where to decide.
  expect((await b.agentCall('POST', `/api/threads/${threadId}/messages`, writer.key, { content: 'held here' })).data.held.reason).toBe('loop');
  const waiting = page.locator('.waiting-here');
  await waiting.getByText("1 message from its agents waits for a person's approval; no participant sees it until then.").waitFor();
  expect(await waiting.getByRole('link', { name: 'Decide on the Overview' }).getAttribute('href')).toBe('/dashboard/overview');
  expect(await axeViolations(page)).toEqual([]);
  await shotAt('governance-thread-paused');
  await page.setViewportSize(PHONE);
  const [scroll, client] = await pageWidths(page);
  expect(scroll).toBe(client);
  await shotAt('governance-thread-paused-phone');
  await page.setViewportSize(DESKTOP);

  await banner.getByRole('button', { name: 'Resume' }).click();
  await page.locator('.paused').waitFor({ state: 'detached' });
  const [resumed] = await h.db.sql`select paused_at, loop_counted_from, holds_messages from threads where id = ${threadId}`;
  expect(resumed!.paused_at).toBeNull();
  expect(resumed!.loop_counted_from).toBeInstanceOf(Date);
  // Resuming decides nothing about the thread's own hold.
  expect(resumed!.holds_messages).toBe(true);
  expect(await holds.isChecked()).toBe(true);
  await holds.uncheck();
  await page.getByText("Off: agents' messages here go straight to the participants.").waitFor();
  expect((await h.db.sql`select action from audit_events where subject = ${threadId} order by id`).map((r) => r.action)).toEqual([
    'thread.holds.set',
    'thread.resume',
    'thread.holds.set',
  ]);
});
