import { expect, test } from 'bun:test';
import { loadConfig } from '../src/config';
import { silentLogger } from '../src/log';
import { startWorker } from '../src/webhooks/worker';
import { axeViolations, pageWidths, useDashboardBrowser } from './support/dashboard-browser';
import { receiver } from './support/receiver';
import { FAST_WEBHOOKS } from './support/webhooks';

// A person brings back a webhook the service switched off, and pauses and resumes one by hand, in
// a real headless Chromium against the real server and worker (src/dashboard/web/pages/
// agent-webhook-controls.ts). Screenshots at 1440 and 390 px go to test-artifacts/dashboard.
const b = useDashboardBrowser({ SESSION_CHECK_MS: '200' }, { width: 1440, height: 900 });
const { h } = b;
const handler = receiver(() => new Response('maintenance until 10:00 UTC, back soon', { status: 503 }));

async function shots(name: string, ready: () => Promise<unknown>) {
  const { page } = b;
  await page.locator('#toast:not(.show)').waitFor({ state: 'attached' });
  await b.screenshot(`${name}-1440`);
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await ready();
  const [wide, seen] = await pageWidths(page);
  expect(wide).toBeLessThanOrEqual(seen!);
  await b.screenshot(`${name}-390`);
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.reload();
  await ready();
}

test('switching back on shows the last test and asks for one; pausing and resuming by hand keep the secret', async () => {
  const { page, base } = b;
  const config = loadConfig({ ...FAST_WEBHOOKS, WEBHOOK_ALLOW_LOCAL: 'true', DATABASE_URL: h.db.url });
  const worker = await startWorker({ sql: h.db.sql, databaseUrl: h.db.url, config, log: silentLogger });
  try {
    const agent = await h.agent('ledger-agent', { webhookUrl: handler.url('/ledger') });
    // Switched off by the sweep after failing with 503s (its health as the attempts left it).
    await h.db.sql`
      insert into endpoint_health (agent_id, last_failure_at, last_failure_status, consecutive_failures, failing_since, warned_stage)
      select id, now() - interval '1 hour', 503, 12, now() - interval '5 days', 2 from agents where username = 'ledger-agent'`;
    await h.db.sql`
      update agents set webhook_disabled_at = now() - interval '50 minutes', webhook_failing_since = now() - interval '5 days',
        webhook_disabled_reason = 'It answered no attempt with 2xx for 5 days, so no more doorbells were sent and the agent polls instead.'
      where username = 'ledger-agent'`;

    await b.signIn('ada@example.com', 'ada');
    await page.goto(`${base}/dashboard/agents?q=ledger-agent`);
    const card = page.locator('[data-agent="ledger-agent"]');
    const badge = card.locator('.health-cell .badge');
    await badge.filter({ hasText: /^Switched off at \S+ — HTTP 503$/ }).waitFor();
    const panel = card.locator('[data-switch-on]');
    await panel.getByText('No test event since it was switched off. Send one to see whether the handler answers now:').waitFor();
    const resendBox = panel.getByLabel('Also resend what failed while it was failing');
    expect(await resendBox.isChecked()).toBe(false);

    // Without a passing test the button says so, and asks; Cancel changes nothing.
    const dialog = page.getByRole('dialog');
    await panel.getByRole('button', { name: 'Switch on without a passing test…' }).click();
    expect(await dialog.getByRole('heading').textContent()).toBe("Switch ledger-agent's webhook on without a passing test?");
    expect(await dialog.locator('p').allTextContents()).toEqual([
      'No test event has been sent since it was switched off.',
      'Doorbells go to it again at once. If it still fails, the service switches it off again after its first warning stage, and its messages wait in the inbox meanwhile.',
    ]);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect((await h.db.sql`select webhook_disabled_at is not null as off from agents where username = 'ledger-agent'`)[0]!.off).toBe(true);

    // A test event right there: the handler still answers 503, and the first bytes of its answer show.
    await panel.getByRole('button', { name: 'Send test event' }).click();
    await panel.locator('[data-test-outcome]', { hasText: /^Sent \S+ by ada — HTTP 503 in \d+ ms/ }).waitFor();
    expect(await panel.locator('[data-test-answer]').textContent()).toBe('maintenance until 10:00 UTC, back soon');
    await panel.getByText('Its last test event since it was switched off did not pass. Send another once the handler is fixed:').waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await shots('webhook-switch-on-failed-test', () => panel.locator('[data-test-answer]').waitFor());

    // Fixed: the next one answers 200. The badge keeps the reason it was switched off for.
    handler.reply(() => new Response('{"ok":true}', { headers: { 'content-type': 'application/json' } }));
    await panel.getByRole('button', { name: 'Send test event' }).click();
    await panel.locator('[data-test-outcome]', { hasText: /^Sent \S+ by ada — HTTP 200 in \d+ ms/ }).waitFor();
    await panel.getByText('It answered the last test event since it was switched off:').waitFor();
    expect(await badge.textContent()).toMatch(/^Switched off at \S+ — HTTP 503$/);
    await shots('webhook-switch-on-passing-test', () => panel.getByRole('button', { name: 'Switch back on' }).waitFor());

    await panel.getByRole('button', { name: 'Switch back on' }).click();
    await page.locator('#toast.show', { hasText: 'Switched back on.' }).waitFor();
    await panel.waitFor({ state: 'detached' });
    expect(await dialog.count()).toBe(0);
    const [enabled] = await h.db.sql`select actor, after from audit_events where subject = 'ledger-agent' and action = 'agent.webhook.enable'`;
    expect(enabled).toEqual({ actor: 'ada', after: { switchedOff: false, resent: 0, passingTest: true } });

    // Paused by hand, with a reason: the row and the detail say who, when and why.
    const secret = (await h.db.sql`select signing_secret from agents where username = 'ledger-agent'`)[0]!.signing_secret;
    expect(secret).toBe(agent.signingSecret);
    await card.getByText('Pause doorbells…').click();
    await card.getByLabel('Reason (optional)').fill('Deploying the ledger handler');
    await b.screenshot('webhook-pause-form-1440');
    await card.getByRole('button', { name: 'Pause', exact: true }).click();
    await page.locator('#toast.show', { hasText: "Paused ledger-agent's doorbells." }).waitFor();
    const pausedNotice = card.locator('[data-webhook-stopped="paused"] > p:first-child');
    await pausedNotice.filter({ hasText: /^Paused by ada at \S+: “Deploying the ledger handler”\. No doorbells go to this webhook: ledger-agent polls, and what arrives waits in its inbox\.$/ }).waitFor();
    expect(await badge.textContent()).toMatch(/^Paused by ada at \S+$/);
    expect(await card.getAttribute('class')).toContain('health-paused');
    const [stored] = await h.db.sql`
      select webhook_url, signing_secret, webhook_paused_by, webhook_disabled_reason from agents where username = 'ledger-agent'`;
    expect(stored).toEqual({ webhook_url: handler.url('/ledger'), signing_secret: secret, webhook_paused_by: 'ada', webhook_disabled_reason: 'Deploying the ledger handler' });
    expect(await axeViolations(page)).toEqual([]);
    await shots('webhook-paused', () => pausedNotice.waitFor());

    expect(await card.getByLabel('Also resend what failed before the pause').isChecked()).toBe(false);
    await card.getByRole('button', { name: 'Resume doorbells' }).click();
    await page.locator('#toast.show', { hasText: 'Resumed.' }).waitFor();
    await pausedNotice.waitFor({ state: 'detached' });
    expect(await badge.textContent()).not.toContain('Paused');
    expect((await h.db.sql`select webhook_disabled_at, webhook_paused_by from agents where username = 'ledger-agent'`)[0]).toEqual({
      webhook_disabled_at: null, webhook_paused_by: null,
    });
    expect(await card.getByText('Pause doorbells…').count()).toBe(1);
  } finally {
    await worker.stop();
  }
}, 60_000);
