import { expect, test } from 'bun:test';
import { setArchived, setWebhook } from '../src/domain/agents/agents';
import { BY_CLI, byPerson } from '../src/domain/people/audit';
import type { Person } from '../src/domain/people/people';
import { confirmClose } from '../src/domain/threads/threads';
import { uniqueName } from './support/harness';
import { axeViolations, pageWidths, useDashboardBrowser } from './support/dashboard-browser';

// The Audit page in a real headless Chromium: the decisions listed newest first with who, what,
// the subject linked and the change; the filters kept in the address; usable on a phone.
const b = useDashboardBrowser();
const { h } = b;

test('a person reads the audit trail, filters it, and the filters stay in the address', async () => {
  const { page, base } = b;
  await b.signIn('auditor@example.com', 'auditor');
  const [auditor] = await h.db.sql<Person[]>`select id, email, username from people where username = 'auditor'`;
  const agent = await h.agent(uniqueName('watched'));
  const other = await h.agent(uniqueName('other'));
  const threadId = await h.thread(agent, [other], 'Quarterly numbers');
  await h.call('POST', `/api/threads/${threadId}/close`, { key: agent.key });
  await setWebhook(h.db.sql, byPerson(auditor!), agent.username, 'http://127.0.0.1:9/hook', { allowLocal: true });
  await confirmClose(h.db.sql, BY_CLI, threadId);
  await setArchived(h.db.sql, byPerson(auditor!), agent.username, true);

  await page.goto(`${base}/dashboard/overview`);
  await page.getByRole('link', { name: 'Audit', exact: true }).click();
  await page.waitForURL(`${base}/dashboard/audit`);
  const first = page.locator('.audit-entry').first();
  await first.waitFor();
  expect(await first.locator('.action').textContent()).toBe('agent.archive');
  expect(await first.locator('.actor').textContent()).toBe('auditor');
  expect([await first.locator('.change dt').textContent(), await first.locator('.change del').textContent(), await first.locator('.change ins').textContent()]).toEqual([
    'archived',
    'false',
    'true',
  ]);
  expect(await first.getByRole('link', { name: agent.username }).getAttribute('href')).toBe(`/dashboard/agents?q=${agent.username}`);
  const close = page.locator('.audit-entry', { hasText: 'thread.close.confirm' });
  expect(await close.locator('.actor').textContent()).toBe('cli');
  expect(await close.getByRole('link', { name: threadId }).getAttribute('href')).toBe(`/dashboard/threads/${threadId}`);
  await b.screenshot('audit');
  await page.screenshot({ path: '.scratch/audit-desktop.png', fullPage: true });
  expect(await axeViolations(page)).toEqual([]);

  // Filter by a family of actions and a subject: the address says so, and a reload keeps it.
  await page.getByLabel('What').fill('agent.');
  await page.getByLabel('Subject').fill(agent.username);
  await page.getByRole('button', { name: 'Apply' }).click();
  await page.waitForURL(`${base}/dashboard/audit?action=agent.&subject=${agent.username}`);
  await page.getByRole('heading', { name: '3 matching decisions, newest first' }).waitFor();
  expect(await page.locator('.audit-entry .action').allTextContents()).toEqual(['agent.archive', 'agent.webhook.set', 'agent.create']);
  await page.reload();
  await page.getByRole('heading', { name: '3 matching decisions, newest first' }).waitFor();
  expect(await page.getByLabel('What').inputValue()).toBe('agent.');

  // A time that is not one is said next to the fields, and the list stays as it was.
  await page.getByLabel('From').fill('yesterday');
  await page.getByRole('button', { name: 'Apply' }).click();
  await page.locator('#audit-time-error', { hasText: 'From must be a time such as' }).waitFor();
  expect(await page.locator('.audit-entry').count()).toBe(3);

  // On a phone nothing scrolls sideways.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await page.locator('.audit-entry').first().waitFor();
  const [scrollWidth, clientWidth] = await pageWidths(page);
  expect(scrollWidth).toBe(clientWidth);
  await b.screenshot('audit-phone');
  await page.screenshot({ path: '.scratch/audit-phone.png', fullPage: true });
  await page.setViewportSize({ width: 1100, height: 800 });

  await page.getByRole('button', { name: 'Clear filters' }).click();
  await page.waitForURL(`${base}/dashboard/audit`);
});
