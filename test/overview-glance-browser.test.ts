import { expect, test } from 'bun:test';
import type { Page } from 'playwright-core';
import { loadConfig } from '../src/config';
import { silentLogger } from '../src/log';
import { startWorker } from '../src/webhooks/worker';
import { axeViolations, pageWidths, untilCount, useDashboardBrowser, type PageGlobals } from './support/dashboard-browser';
import { eventually, receiver } from './support/receiver';
import { FAST_WEBHOOKS } from './support/webhooks';

// In a real Chromium, at a desk's width (1440 px) and a phone's (390 px), in a broad outage:
// thirteen webhooks in trouble, one of them really answering 503 through the worker. The Overview
// counts and groups all of them and shows them all on demand, its headline and legends read
// without pointing at anything and its figures table fits; the Agents page narrows to the trouble
// and puts it first; the Deliveries and thread pages say when an agent's webhook is switched off
// and withhold a resend that would only fail again; on a phone an attempt's answer comes before
// the request's headers, which carry no stray ": ".
const b = useDashboardBrowser({}, { width: 1440, height: 900 });
const { h } = b;

const OUTAGE = Array.from({ length: 12 }, (_, i) => `outage-${String(i + 1).padStart(2, '0')}`);
const SWITCHED_OFF = ['outage-07', 'outage-08'];
const REASON = 'It answered no attempt with 2xx for 5 days, so no more doorbells were sent and the agent polls instead.';
const handler = receiver(() => new Response('{"error":"overloaded, try again later"}', { status: 503, headers: { 'content-type': 'application/json', 'retry-after': '30' } }));

const texts = (page: Page, selector: string) => page.locator(selector).allTextContents().then((all) => all.map((t) => t.replace(/\s+/g, ' ').trim()));

async function fitsAndIsClean(page: Page) {
  const [wide, seen] = await pageWidths(page);
  expect(wide).toBeLessThanOrEqual(seen!);
  expect(await axeViolations(page)).toEqual([]);
}

test('an operator sees every webhook in trouble at a glance, finds them on Agents, and is told where deliveries go to a switched-off agent', async () => {
  const { page, base } = b;
  const config = loadConfig({ ...FAST_WEBHOOKS, WEBHOOK_ALLOW_LOCAL: 'true', DATABASE_URL: h.db.url });
  const worker = await startWorker({ sql: h.db.sql, databaseUrl: h.db.url, config, log: silentLogger });
  try {
    // Twelve endpoints in trouble as the worker leaves them (eight answering 503, two of those
    // switched off; four refusing connections), one healthy; and one really answering 503.
    for (const [i, username] of OUTAGE.entries()) {
      await h.agent(username, { webhookUrl: `http://127.0.0.1:9/${username}` });
      const refused = i >= 8;
      await h.db.sql`
        insert into endpoint_health (agent_id, last_failure_at, last_failure_status, last_failure_error, consecutive_failures, failing_since)
        select id, now(), ${refused ? null : 503}, ${refused ? 'connection failed (ECONNREFUSED): connect ECONNREFUSED 127.0.0.1:9' : null}, 5,
               now() - ${20 - i} * interval '1 hour'
        from agents where username = ${username}`;
    }
    await h.db.sql`
      update agents set webhook_disabled_at = now() - interval '2 hours', webhook_disabled_reason = ${REASON},
        webhook_failing_since = (select failing_since from endpoint_health where agent_id = agents.id)
      where username = any(${SWITCHED_OFF})`;
    await h.agent('steady-hook', { webhookUrl: 'http://127.0.0.1:9/steady' });
    await h.db.sql`insert into endpoint_health (agent_id, last_success_at) select id, now() from agents where username = 'steady-hook'`;
    const writer = await h.agent('ops-writer');
    const poller = await h.agent('ops-poller');
    const busy = await h.agent('busy-agent', { webhookUrl: handler.url('/hook') });
    const [offAgent] = await h.db.sql<{ username: string }[]>`select username from agents where username = 'outage-07'`;
    const threadId = await h.thread(writer, [poller, busy, { username: offAgent!.username, key: '' }], 'Quarter close');
    for (const content of ['Ledger is ready', 'Ledger checked']) await h.post(writer, threadId, content);
    await eventually(async () => {
      const [row] = await h.db.sql<{ n: number }[]>`
        select count(*)::int as n from deliveries d join agents a on a.id = d.recipient_id where a.username = 'busy-agent' and d.step = 'failed'`;
      return row!.n === 2;
    }, 10_000);
    const [day] = await h.db.sql<{ deliveries: number; failed: number; polling: number }[]>`
      select count(*)::int as deliveries, (count(*) filter (where step = 'failed'))::int as failed,
             (count(*) filter (where step = 'accepted' and not webhook))::int as polling
      from deliveries`;
    expect(day).toEqual({ deliveries: 6, failed: 2, polling: 4 });

    // The Overview, at a desk.
    await b.signIn('ops@example.com', 'ops');
    await page.goto(`${base}/dashboard/overview`);
    await page.locator('[data-trouble-total]', { hasText: '13' }).waitFor();
    expect(await texts(page, '[data-trouble-group]')).toEqual(['HTTP 503 — 9 endpoints (2 switched off)', 'connection failed (ECONNREFUSED) — 4 endpoints']);
    expect(await page.locator('.trouble .lines > li').count()).toBe(10);
    expect(await page.locator('.trouble .lines > li').first().getAttribute('data-trouble')).toBe('outage-07');
    // Headline: each figure with what it counts.
    expect((await texts(page, '[data-headline="failed"] .hint'))[0]).toMatch(/^2 of 6 deliveries accepted in the last 24 hours$/);
    expect(await page.locator('[data-headline="failed"] .big').textContent()).toMatch(/^33(\.3)?\s?%$/);
    expect(await texts(page, '[data-headline="endpoints"] li')).toEqual(['2 switched off', '11 failing', '0 paused', '0 not tried yet', '1 healthy']);
    expect(await page.locator('[data-headline="endpoints"] li a').first().getAttribute('href')).toBe('/dashboard/agents?health=disabled&sort=trouble');
    expect(await texts(page, '[data-headline="stalled"] .big')).toEqual(['0']);
    expect(await texts(page, '[data-headline="holds"] .big')).toEqual(['0']);
    // All thirteen, on demand.
    await page.getByRole('button', { name: 'Show all 13' }).click();
    await untilCount(page, '.trouble .lines > li', 13);
    await page.getByRole('button', { name: 'Show the first 10' }).waitFor();
    expect(await page.getByRole('link', { name: 'On the Agents page' }).getAttribute('href')).toBe('/dashboard/agents?health=disabled%2Cfailing&sort=trouble');

    // The legends read without pointing: each band its total, each latency line its figure over all.
    await page.locator('.chart-plot canvas').first().waitFor();
    const legend = async (n: number) =>
      page.locator('.chart').nth(n).locator('.u-legend .u-series').evaluateAll((rows) =>
        rows.map((r) => [(r as any).querySelector('.u-label').textContent, (r as any).querySelector('.u-value').textContent]),
      );
    expect(await legend(0)).toEqual([
      ['Time', 'In all'],
      ['Fetched', '0'],
      ['Delivered', '0'],
      ['Notified', '0'],
      ['Waiting for a poll', '4'],
      ['Doorbell owed', '0'],
      ['Retrying', '0'],
      ['Failed', '2'],
    ]);
    expect((await legend(1))[0]).toEqual(['Time', 'Over all']);
    // A fresh service: five-minute bins, not one bar at the edge of a day.
    expect(await page.locator('#outcomes-heading').textContent()).toBe('Deliveries per 5 minutes, by where each is now');
    // The figures table's last columns, Failed and Total, are in view at 1440 px.
    const outcomes = page.locator('.chart').first();
    await outcomes.getByText('Figures as a table').click();
    const table = outcomes.locator('.chart-table');
    const box = (await table.boundingBox())!;
    for (const column of ['Failed', 'Total']) {
      const th = (await table.locator('thead th', { hasText: column }).boundingBox())!;
      expect([column, th.x + th.width <= box.x + box.width]).toEqual([column, true]);
    }
    expect(await table.evaluate((el) => (el as any).scrollWidth <= (el as any).clientWidth)).toBe(true);
    expect(await texts(page, '.chart >> nth=0 >> tfoot td')).toEqual(['0', '0', '0', '4', '0', '0', '2', '6']);
    await fitsAndIsClean(page);
    await b.screenshot('overview-glance');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await page.locator('[data-trouble-total]').waitFor();
    await page.locator('.chart-plot canvas').first().waitFor();
    await fitsAndIsClean(page);
    await b.screenshot('overview-glance-phone');

    // Agents: the trouble only, switched off first; narrowed again from the page's own control.
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(`${base}/dashboard/agents?health=disabled,failing&sort=trouble`);
    await untilCount(page, '.agents-table > tbody', 13);
    const rows = await page.locator('.agents-table > tbody').evaluateAll((all) => all.map((t) => (t as any).dataset.agent));
    expect(rows.slice(0, 3)).toEqual(['outage-08', 'outage-07', 'busy-agent']);
    expect(rows.slice(3).sort()).toEqual(OUTAGE.filter((u) => !SWITCHED_OFF.includes(u)));
    expect(await page.getByLabel('Webhook health').inputValue()).toBe('disabled,failing');
    expect(await page.getByLabel('Order').inputValue()).toBe('trouble');
    await page.getByLabel('Webhook health').selectOption('disabled');
    await untilCount(page, '.agents-table > tbody', 2);
    await page.waitForURL(`${base}/dashboard/agents?health=disabled&sort=trouble`);
    await fitsAndIsClean(page);
    await b.screenshot('agents-by-health');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await untilCount(page, '.agents-table > tbody', 2);
    await fitsAndIsClean(page);
    await b.screenshot('agents-by-health-phone');

    // Deliveries to a switched-off agent: the banner, with the way back.
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(`${base}/dashboard/deliveries?agent=outage-07`);
    const banner = page.locator('[data-switched-off="outage-07"]');
    await banner.waitFor();
    expect(await texts(page, '[data-switched-off="outage-07"] p')).toEqual([
      expect.stringMatching(
        /^outage-07's webhook is switched off since \d\d:\d\d \(last failure: HTTP 503\)\. It answered no attempt with 2xx for 5 days, so no more doorbells were sent and the agent polls instead\. Its deliveries wait in its inbox, listed here as Accepted\.$/,
      ),
      "Open outage-07's webhook health to send it a test event and switch it back on.",
    ]);
    expect(await banner.getByRole('link').getAttribute('href')).toBe('/dashboard/agents?q=outage-07');
    // Resending to it is offered (what is resent waits in its inbox); to a webhook still failing, not.
    await page.getByRole('button', { name: 'Resend all Failed in this view…' }).waitFor();
    await fitsAndIsClean(page);
    await b.screenshot('deliveries-switched-off');
    await page.goto(`${base}/dashboard/deliveries?agent=busy-agent`);
    const withheld = page.locator('[data-resend-withheld]');
    await withheld.waitFor();
    expect((await texts(page, '[data-resend-withheld]'))[0]).toMatch(
      /^No resend offered: busy-agent's webhook is still failing with HTTP 503, since \d\d:\d\d, so what is resent would fail again\. Fix its handler, send a test event from its webhook health, then resend once it answers 2xx\.$/,
    );
    expect(await page.getByRole('button', { name: 'Resend all Failed in this view…' }).count()).toBe(0);
    expect(await page.locator('[data-switched-off]').count()).toBe(0);
    await page.goto(`${base}/dashboard/deliveries?state=stalled`);
    await page.getByText('No deliveries match these filters.').waitFor();
    expect(await page.getByRole('button', { name: 'Resend all Failed in this view…' }).count()).toBe(0);
    // Unfiltered, the banner names the switched-off recipient among those in view.
    await page.goto(`${base}/dashboard/deliveries`);
    await banner.waitFor();
    expect(await page.locator('[data-switched-off]').count()).toBe(1);
    await page.getByRole('button', { name: 'Resend all Failed in this view…' }).waitFor();
    // And on the thread's page.
    await page.goto(`${base}/dashboard/threads/${threadId}`);
    await banner.waitFor();
    expect(await page.locator('[data-switched-off]').count()).toBe(1);
    await fitsAndIsClean(page);

    // On a phone, an attempt's answer comes first, and its headers read "name value", not ": value".
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${base}/dashboard/deliveries?agent=busy-agent`);
    const first = page.locator('tbody.delivery').first();
    await first.getByRole('button', { name: /^Details/ }).click();
    await first.getByText(/^Attempt log/).click();
    await first.getByText('Request and response').first().click();
    const detail = first.locator('.attempt-detail').first();
    await detail.locator('pre', { hasText: '"error": "overloaded, try again later"' }).waitFor();
    const stray = await detail.locator('table.kv td, table.kv th').evaluateAll((cells) =>
      cells.map((c) => (globalThis as unknown as PageGlobals).getComputedStyle(c, '::before').content).filter((c) => c !== 'none' && c !== 'normal'),
    );
    expect(stray).toEqual([]);
    expect(await detail.locator('table.kv td').first().evaluate((td) => (td as any).innerText)).not.toMatch(/^:/);
    const top = async (text: string) => (await detail.locator('dt', { hasText: text }).boundingBox())!.y;
    const [status, body, sentHeaders, summary] = [await top('Response status'), await top('Response body'), await top('Headers sent'), (await detail.locator('summary').first().boundingBox())!.y];
    expect(status < body && body < sentHeaders).toBe(true);
    // The handler's answer within the first screen of the opened detail.
    expect(body - summary).toBeLessThan(300);
    expect(await detail.locator('dt').allTextContents()).toEqual([
      'Sent to', 'Response status', 'Response body (first KiB)', 'Response headers', 'Headers sent', 'Payload sent',
    ]);
    await fitsAndIsClean(page);
    await detail.evaluate((el) => (el as any).scrollIntoView());
    await b.screenshot('attempt-detail-phone');
  } finally {
    await worker.stop();
  }
}, 60_000);
