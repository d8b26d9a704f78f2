import { expect, test } from 'bun:test';
import { axeViolations, pageWidths, useDashboardBrowser } from './support/dashboard-browser';

// The panel "Who may contact it" under an agent's row, in a real headless Chromium: a person sets
// the policy and blocks an agent, and the agent that was refused by neither before is refused now.
const b = useDashboardBrowser();
const { h } = b;

test('a person sets an agent to its contacts only, allows one agent and blocks another; both hold at the API', async () => {
  const { page, base } = b;
  const keys: Record<string, string> = {};
  for (const username of ['desk', 'friend', 'pest']) keys[username] = (await h.agent(username)).key;
  await b.signIn('grace@example.com', 'grace');
  await page.goto(`${base}/dashboard/agents?q=desk`);
  const desk = page.locator('[data-agent="desk"]');
  await desk.locator('.contact-policy').waitFor();
  const panel = desk.locator('.contact-policy');
  const anyAgent = panel.getByLabel(/^Any agent/);
  expect(await anyAgent.isChecked()).toBe(true);
  expect(await panel.getByRole('button', { name: 'Save policy' }).isDisabled()).toBe(true);

  await panel.getByLabel(/^Its contacts/).check();
  await panel.getByRole('button', { name: 'Save policy' }).click();
  await page.locator('#toast', { hasText: 'desk now accepts threads from its contacts only.' }).waitFor();
  const [stored] = await h.db.sql`select contact_policy from agents where username = 'desk'`;
  expect(stored!.contact_policy).toBe('contacts');

  await panel.getByLabel('Agent to add').fill('friend');
  await panel.getByRole('button', { name: 'Add to list' }).click();
  await panel.locator('[data-list="allow"] li', { hasText: 'friend' }).waitFor();
  await panel.getByLabel('Agent to add').fill('pest');
  await panel.getByLabel('List', { exact: true }).selectOption('block');
  await panel.getByRole('button', { name: 'Add to list' }).click();
  await panel.locator('[data-list="block"] li', { hasText: 'pest' }).waitFor();
  // An agent that does not exist is refused beside the form, and nothing changes.
  await panel.getByLabel('Agent to add').fill('nobody-here');
  await panel.getByRole('button', { name: 'Add to list' }).click();
  await panel.locator('#contacts-error-desk', { hasText: 'No agent named nobody-here.' }).waitFor();

  const opened = (key: string) => b.agentCall('POST', '/api/threads', key, { title: 'Hi', participantUsernames: ['desk'] });
  expect((await opened(keys.friend!)).success).toBe(true);
  expect(await opened(keys.pest!)).toMatchObject({ success: false, code: 'blocked' });
  const audit = await h.db.sql`select actor, action from audit_events where subject = 'desk' and action like 'agent.contact%' order by at, id`;
  expect(audit.map((a) => `${a.actor} ${a.action}`)).toEqual(['grace agent.contact_policy.set', 'grace agent.contacts.allow', 'grace agent.contacts.block']);

  expect(await axeViolations(page)).toEqual([]);
  await page.locator('#toast:not(.show)').waitFor({ state: 'attached' });
  await panel.screenshot({ path: '.scratch/contacts-desktop.png' });
  await b.screenshot('agents-contacts');
  await page.setViewportSize({ width: 390, height: 844 });
  const [scroll, client] = await pageWidths(page);
  expect(scroll).toBe(client!);
  await panel.screenshot({ path: '.scratch/contacts-phone.png' });
  await b.screenshot('agents-contacts-phone');
  await page.setViewportSize({ width: 1100, height: 800 });

  // Removing takes the agent off its list.
  await panel.getByRole('button', { name: 'Remove pest from the block list' }).click();
  await panel.locator('[data-list="block"]', { hasText: 'Nobody' }).waitFor();
  expect((await opened(keys.pest!)).code).toBe('contact_policy');
});
