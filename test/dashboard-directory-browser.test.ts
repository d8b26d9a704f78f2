import { expect, test } from 'bun:test';
import { axeViolations, pageWidths, useDashboardBrowser } from './support/dashboard-browser';
import { eventually } from './support/receiver';

// Presence and profiles on the dashboard, in a real headless Chromium: an agent holding its event
// stream (on the harness's instance, not the one the browser talks to) shows online on the
// Overview and the Agents list; a person writes its profile, which the directory then serves.
const b = useDashboardBrowser({}, { width: 1440, height: 900 });
const { h } = b;

test('the Overview counts agents online, the Agents list shows who is, and a person sets a profile the directory serves', async () => {
  const { page, base } = b;
  const scout = await h.agent('scout');
  const seeker = await h.agent('seeker');
  await h.agent('idle');
  const stream = await h.app.handle(new Request('http://localhost/api/events', { headers: { authorization: `Bearer ${scout.key}` } }));
  expect(stream.status).toBe(200);
  try {
    await eventually(async () => (await h.db.sql`select 1 from presence_connections c join agents a on a.id = c.agent_id where a.username = 'scout'`).length > 0 || null);
    await b.signIn('ada@example.com', 'ada');

    await page.goto(`${base}/dashboard/`);
    await page.locator('.agents-online', { hasText: '1 agent online' }).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await b.screenshot('overview-agents-online');
    await page.setViewportSize({ width: 390, height: 844 });
    const [scroll, client] = await pageWidths(page);
    expect(scroll).toBe(client!);
    await b.screenshot('overview-agents-online-phone');
    await page.setViewportSize({ width: 1440, height: 900 });

    await page.goto(`${base}/dashboard/agents`);
    const row = page.locator('[data-agent="scout"]');
    await row.locator('.presence.online', { hasText: 'Online' }).waitFor();
    expect(await page.locator('[data-agent="idle"] .presence.offline').textContent()).toContain('Never seen');
    await row.getByRole('button', { name: 'Manage scout' }).click();
    const panel = row.locator('.profile');
    await panel.getByLabel('Display name').fill('Scout');
    await panel.getByLabel('Description').fill('Finds flaky tests and reports them.');
    await panel.getByLabel('Tags or skills').fill('testing, CI');
    await panel.getByRole('button', { name: 'Save profile' }).click();
    await page.locator('#toast', { hasText: "scout's profile is saved." }).waitFor();
    expect(await panel.getByLabel('Tags or skills').inputValue()).toBe('ci, testing');

    const found = await b.agentCall('GET', '/api/agents?q=flaky', seeker.key);
    expect(found.data.agents).toEqual([
      { username: 'scout', displayName: 'Scout', description: 'Finds flaky tests and reports them.', tags: ['ci', 'testing'], updatedAt: expect.any(String), presence: { online: true, lastSeenAt: null } },
    ]);
    const [record] = await h.db.sql`select actor, after from audit_events where action = 'agent.profile.set' and subject = 'scout'`;
    expect(record).toEqual({ actor: 'ada', after: { displayName: 'Scout', description: 'Finds flaky tests and reports them.', tags: ['ci', 'testing'] } });

    // A tag the directory cannot hold is refused beside the form, and nothing changes.
    await panel.getByLabel('Tags or skills').fill('two words');
    await panel.getByRole('button', { name: 'Save profile' }).click();
    await panel.locator('#profile-error-scout', { hasText: 'tags.0 must be letters, digits' }).waitFor();

    expect(await axeViolations(page)).toEqual([]);
    await page.locator('#toast:not(.show)').waitFor({ state: 'attached' });
    await b.screenshot('agents-presence-profile');
    await page.setViewportSize({ width: 390, height: 844 });
    const [wide, fits] = await pageWidths(page);
    expect(wide).toBe(fits!);
    await b.screenshot('agents-presence-profile-phone');
  } finally {
    await stream.body!.cancel();
  }
});
