import { expect, test } from 'bun:test';
import { axeViolations, pageWidths, useDashboardBrowser } from './support/dashboard-browser';

// The Keys panel under an agent's row, in a real headless Chromium: a person creates a key, copies
// it from where it is shown once, and revokes the agent's first key after confirming; the new key
// answers at the API and the revoked one is refused; both decisions are in the audit trail.
const b = useDashboardBrowser({}, { width: 1440, height: 900 });
const { h } = b;

test('a person creates a key, sees it once, and revokes the old one after confirming; the API follows at once', async () => {
  const { page, base } = b;
  const first = (await h.agent('keyholder')).key;
  // Used once, so that its last use shows once written.
  expect((await b.agentCall('GET', '/api/threads', first)).success).toBe(true);
  await h.agentCache.flushKeyUse();
  await b.signIn('grace@example.com', 'grace');
  await page.goto(`${base}/dashboard/agents?q=keyholder`);
  const panel = page.locator('[data-agent="keyholder"] .agent-keys');
  await panel.locator('[data-key="initial"]').waitFor();
  expect(await panel.locator('[data-key="initial"] code').textContent()).toBe(`${first.slice(0, 12)}…`);

  await panel.getByLabel("New key's name").fill('ci runner');
  await panel.getByLabel(/^Expires/).fill('2031-03-01T12:00');
  await panel.getByRole('button', { name: 'Create key' }).click();
  const shown = panel.locator('[data-new-key] code');
  await shown.waitFor();
  const fresh = (await shown.textContent())!;
  expect(fresh).toMatch(/^agt_[A-Za-z0-9_-]{43}$/);
  await panel.locator('[data-key="ci runner"]').waitFor();
  expect((await b.agentCall('GET', '/api/threads', fresh)).success).toBe(true);
  const [stored] = await h.db.sql`select expires_at from agent_keys where name = 'ci runner'`;
  expect(stored!.expires_at).toBeInstanceOf(Date);

  expect(await axeViolations(page)).toEqual([]);
  await page.locator('#toast:not(.show)').waitFor({ state: 'attached' });
  await panel.screenshot({ path: '.scratch/keys-desktop.png' });
  await b.screenshot('agents-keys');
  await page.setViewportSize({ width: 390, height: 844 });
  const [scroll, client] = await pageWidths(page);
  expect(scroll).toBe(client!);
  await panel.screenshot({ path: '.scratch/keys-phone.png' });
  await b.screenshot('agents-keys-phone');
  await page.setViewportSize({ width: 1440, height: 900 });

  // Revoking asks first; cancelled, nothing changes.
  await panel.getByRole('button', { name: 'Revoke key initial' }).click();
  const dialog = page.getByRole('dialog');
  expect(await dialog.locator('#confirm-title').textContent()).toBe("Revoke keyholder's key “initial”?");
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  expect((await b.agentCall('GET', '/api/threads', first)).success).toBe(true);
  await panel.getByRole('button', { name: 'Revoke key initial' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).click();
  await page.locator('#toast', { hasText: 'Key “initial” revoked.' }).waitFor();
  await panel.locator('[data-key="initial"]').waitFor({ state: 'detached' });
  expect(await b.agentCall('GET', '/api/threads', first)).toEqual({ success: false, error: 'The API key is not recognised or its agent is archived.' });
  expect((await b.agentCall('GET', '/api/threads', fresh)).success).toBe(true);

  // The last key left is refused beside the panel.
  await panel.getByRole('button', { name: 'Revoke key ci runner' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).click();
  await panel.locator('#keys-error-keyholder', { hasText: "This is the agent's last key" }).waitFor();

  const audit = await h.db.sql`select actor, action from audit_events where subject = 'keyholder' and action like 'agent.key.%' order by at, id`;
  expect(audit.map((a) => `${a.actor} ${a.action}`)).toEqual(['grace agent.key.create', 'grace agent.key.revoke']);
});
