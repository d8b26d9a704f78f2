import { expect, test } from 'bun:test';
import { axeViolations, pageWidths, useDashboardBrowser } from './support/dashboard-browser';

// "Rotate secret" on an agent's webhook panel, in a real headless Chromium: a person chooses a
// grace, sees the new secret once, and the panel says until when the old one still signs.
const b = useDashboardBrowser();
const { h } = b;

test('a person rotates the signing secret with a grace; the new one is shown, the old one signs until the grace ends', async () => {
  const { page, base } = b;
  const created = await h.agent('vault', { webhookUrl: 'http://127.0.0.1:9/vault' });
  await b.signIn('rosa@example.com', 'rosa');
  await page.goto(`${base}/dashboard/agents?q=vault`);
  const card = page.locator('[data-agent="vault"]');
  // The only agent found opens beneath its row.
  await card.locator('.agent-webhook').waitFor();
  await card.getByRole('button', { name: 'Rotate secret' }).click();
  const grace = card.getByLabel('The old secret keeps verifying for');
  expect(await grace.inputValue()).toBe('');
  await grace.selectOption('3d');
  expect(await axeViolations(page)).toEqual([]);
  await card.locator('.agent-webhook').screenshot({ path: '.scratch/rotate-form-desktop.png' });
  await b.screenshot('agents-rotate-secret-form');

  await card.locator('form.rotate-secret').getByRole('button', { name: 'Rotate secret' }).click();
  await page.locator('#toast', { hasText: 'Secret rotated; the new one is shown below. The old one verifies until' }).waitFor();
  const [row] = await h.db.sql`
    select signing_secret, previous_signing_secret, extract(epoch from previous_signing_secret_until - signing_secret_rotated_at)::int as grace
    from agents where username = 'vault'`;
  expect({ ...row }).toEqual({ signing_secret: expect.stringMatching(/^whsec_/), previous_signing_secret: created.signingSecret, grace: 3 * 86_400 });
  await card.locator('.secret code', { hasText: row!.signing_secret }).waitFor();
  await card.locator('.grace', { hasText: 'Doorbells are signed with the previous secret too until' }).waitFor();
  expect(await card.locator('form.rotate-secret').count()).toBe(0);
  const [audit] = await h.db.sql`select actor, after->>'graceMs' as grace from audit_events where action = 'agent.webhook.secret.rotate'`;
  expect({ ...audit }).toEqual({ actor: 'rosa', grace: String(3 * 86_400_000) });

  expect(await axeViolations(page)).toEqual([]);
  await page.locator('#toast:not(.show)').waitFor({ state: 'attached' });
  await page.setViewportSize({ width: 1440, height: 900 });
  await card.locator('.agent-webhook').screenshot({ path: '.scratch/rotate-done-desktop.png' });
  await b.screenshot('agents-rotate-secret');
  await page.setViewportSize({ width: 390, height: 844 });
  const [scroll, client] = await pageWidths(page);
  expect(scroll).toBe(client!);
  await card.getByRole('button', { name: 'Rotate secret' }).click();
  await card.locator('.agent-webhook').screenshot({ path: '.scratch/rotate-form-phone.png' });
  await b.screenshot('agents-rotate-secret-phone');
  expect(await axeViolations(page)).toEqual([]);

  // No grace: the old secret stops at once, and the panel no longer speaks of one.
  await card.getByLabel('The old secret keeps verifying for').selectOption('0');
  await card.locator('form.rotate-secret').getByRole('button', { name: 'Rotate secret' }).click();
  await page.locator('#toast', { hasText: 'The old one no longer verifies.' }).waitFor();
  await card.locator('.grace').waitFor({ state: 'detached' });
  const [after] = await h.db.sql`select previous_signing_secret from agents where username = 'vault'`;
  expect(after!.previous_signing_secret).toBeNull();
});
