import { expect, test } from 'bun:test';
import { endpointHealthRule } from '../src/config';
import { countEndpoints, ENDPOINT_LATENCY_BOUNDS_MS, sweepEndpointHealth } from '../src/domain/agents/endpoint-health';
import { owedDoorbell, recordAttempt } from '../src/domain/deliveries/delivery-steps';
import { afterAttempt, type AttemptOutcome } from '../src/domain/deliveries/retry-policy';
import { ARTIFACTS, axeViolations, pageWidths, useDashboardBrowser } from './support/dashboard-browser';
import type { TestAgent } from './support/harness';
import { post } from './support/webhooks';

// The figures a person reads on an endpoint's health, against its attempt log. A known history
// is recorded through the function the worker records attempts with (recordAttempt), at chosen
// times and durations; the dashboard API's figures and the page's are then compared with those
// computed here from delivery_attempts: true percentiles of the last 100 attempts, exact counts,
// mean and max per hour, day and five-minute window, and the histogram's one claim ("95 % under").
// Beside it, endpoints failing (warned, with the handler's reason), slow and not reporting, on the
// Agents row, the health detail and the Overview, screenshotted at 1440 and 390 px.
const b = useDashboardBrowser({}, { width: 1440, height: 900 });
const { h } = b;
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const hook = 'http://127.0.0.1:9/hook';

const ok = (): AttemptOutcome => ({ status: 200, error: null, responseBody: '{"ok":true}' });
const down = (): AttemptOutcome => ({ status: 503, error: null, responseBody: 'upstream down: the billing database is in maintenance until 16:00' });

// Posts one message and records one attempt of its doorbell, started `agoMs` ago and taking `ms`.
async function attempt(sender: TestAgent, recipient: TestAgent, agoMs: number, ms: number, outcome: AttemptOutcome) {
  const { deliveryId } = await post(h, sender, recipient, { content: 'ring' });
  const owed = (await owedDoorbell(h.db.sql, deliveryId))!;
  await recordAttempt(h.db.sql, {
    deliveryId,
    endpoint: { agentId: owed.recipientId, webhookVersion: owed.webhookVersion, url: owed.url },
    publish: owed.publish,
    attempt: owed.attempt,
    resend: owed.resend,
    attemptedAt: new Date(Date.now() - agoMs),
    durationMs: ms,
    outcome,
    next: afterAttempt(outcome, owed.attempt, { delaysMs: [60_000] }),
  });
  return deliveryId;
}

type Logged = { at: number; ms: number; ok: boolean };
const logOf = async (username: string): Promise<Logged[]> =>
  (
    await h.db.sql<{ at: Date; ms: number; status: number | null }[]>`
      select da.attempted_at as at, da.duration_ms as ms, da.status
      from delivery_attempts da join deliveries d on d.id = da.delivery_id join agents a on a.id = d.recipient_id
      where a.username = ${username} order by da.attempted_at`
  ).map((r) => ({ at: r.at.getTime(), ms: r.ms, ok: r.status !== null && r.status >= 200 && r.status < 300 }));

// The nearest rank: the duration of the attempt at rank ⌈q·n⌉, as a person would count it off.
const nearestRank = (sorted: number[], q: number) => sorted[Math.ceil(q * sorted.length) - 1]!;
const WINDOW = 5 * MINUTE;
const windowOf = (at: number) => Math.floor(at / WINDOW) * WINDOW;

function periodFigures(log: Logged[], from: number) {
  const inIt = log.filter((a) => windowOf(a.at) >= from);
  const ms = inIt.map((a) => a.ms);
  const attempts = inIt.length;
  const successes = inIt.filter((a) => a.ok).length;
  // The smallest bucket bound under which at least 95 % of the attempts took.
  const under = ENDPOINT_LATENCY_BOUNDS_MS.find((bound) => ms.filter((m) => m < bound).length >= Math.ceil(0.95 * attempts)) ?? null;
  return {
    attempts, successes, successRate: successes / attempts, timed: attempts,
    meanMs: Math.round(ms.reduce((a, b) => a + b, 0) / attempts), maxMs: Math.max(...ms), p95UnderMs: under,
  };
}

const digits = (text: string | null) => (text ?? '').replace(/[^\d]/g, '');

test('the figures shown for an endpoint are those of its attempt log, and every state says what it is', async () => {
  const { page, base } = b;
  await b.signIn('ops@example.com', 'ops');
  const sender = await h.agent('figures-sender');
  const steady = await h.agent('figures-steady', { webhookUrl: hook });
  const failing = await h.agent('figures-failing', { webhookUrl: hook });
  const slow = await h.agent('figures-slow', { webhookUrl: hook });
  const quiet = await h.agent('figures-quiet', { webhookUrl: hook });

  // 130 attempts: 5 older than a day, 15 over the day, 110 in the last 50 minutes (the last 100
  // of them the recent ones), one in seven answered 503, durations spread from 3 ms to 1.9 s.
  const history: [number, number, AttemptOutcome][] = [];
  for (let i = 0; i < 130; i++) {
    const ago = i < 5 ? 30 * HOUR + i * MINUTE : i < 20 ? 20 * HOUR - (i - 5) * HOUR : 50 * MINUTE - (i - 20) * 25_000;
    const ms = i % 23 === 0 ? 1_900 - i : 3 + ((i * 37) % 640);
    history.push([ago, ms, i % 7 === 3 && i !== 129 ? down() : ok()]);
  }
  for (const [ago, ms, outcome] of history) await attempt(sender, steady, ago, ms, outcome);

  await attempt(sender, failing, 2 * HOUR, 120, down());
  await attempt(sender, failing, MINUTE, 95, down());
  await sweepEndpointHealth(h.db.sql, endpointHealthRule(h.config));
  for (let i = 0; i < 12; i++) await attempt(sender, slow, (12 - i) * MINUTE, 2_400 + i * 31, ok());
  const unreported = await attempt(sender, quiet, 20 * MINUTE, 40, ok());
  await h.db.sql`update deliveries set notified_at = now() - interval '15 minutes' where id = ${unreported}`;

  const cookie = (await b.context.cookies(`${base}/dashboard/`)).map((c) => `${c.name}=${c.value}`).join('; ');
  const read = async (path: string) => {
    const res = await fetch(`${base}/dashboard/api${path}`, { headers: { cookie } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { data: any }).data;
  };
  const healthOf = async (username: string) => (await read(`/agents?q=${username}`)).items.find((a: any) => a.username === username).health;

  // The API's figures against the log.
  const log = await logOf(steady.username);
  expect(log).toHaveLength(130);
  const now = Date.now();
  const recent = log.slice(-100);
  const sorted = recent.map((a) => a.ms).toSorted((a, b) => a - b);
  const health = await healthOf(steady.username);
  expect(health.state).toBe('healthy');
  expect(health.recent).toEqual({
    attempts: 100,
    since: new Date(recent[0]!.at).toISOString(),
    p50Ms: nearestRank(sorted, 0.5),
    p95Ms: nearestRank(sorted, 0.95),
    maxMs: sorted.at(-1),
  });
  expect(health.lastHour).toEqual(periodFigures(log, now - HOUR));
  expect(health.lastDay).toEqual(periodFigures(log, now - 24 * HOUR));
  expect(health.lastHour.attempts).toBe(110);
  expect(health.lastDay.attempts).toBe(125);

  // Window by window, as the charts draw them: by the hour, as the attempts span 20 hours.
  const series = await read(`/agents/${steady.username}/webhook/series?hours=24`);
  const byWindow = new Map<number, Logged[]>();
  const hourOf = (at: number) => Math.floor(at / HOUR) * HOUR;
  for (const a of log.filter((a) => windowOf(a.at) >= windowOf(now - 24 * HOUR) + WINDOW)) byWindow.set(hourOf(a.at), [...(byWindow.get(hourOf(a.at)) ?? []), a]);
  expect(series.windows).toEqual(
    [...byWindow].map(([at, as]) => ({
      at: new Date(at).toISOString(),
      attempts: as.length,
      successes: as.filter((a) => a.ok).length,
      failures: as.filter((a) => !a.ok).length,
      meanMs: Math.round(as.reduce((n, a) => n + a.ms, 0) / as.length),
      maxMs: Math.max(...as.map((a) => a.ms)),
    })),
  );
  expect([series.windowMinutes, series.hours]).toEqual([60, 24]);
  // An endpoint tried over the last two hours is charted five minutes at a time, from its first attempt.
  const fresh = await read(`/agents/${failing.username}/webhook/series?hours=24`);
  expect([fresh.windowMinutes, fresh.windows.map((w: { failures: number }) => w.failures)]).toEqual([5, [1, 1]]);
  const refused = await fetch(`${base}/dashboard/api/agents/${steady.username}/webhook/series?hours=0`, { headers: { cookie } });
  expect(refused.status).toBe(400);
  expect(await refused.json()).toEqual({ success: false, error: 'hours must be a whole number from 1 to 48', code: 'invalid', field: 'hours' });

  // The other states, each with what made it so.
  const failed = await healthOf(failing.username);
  expect([failed.state, failed.lastFailureStatus, failed.lastFailureBody, failed.warnedStage, failed.warnStages]).toEqual([
    'failing', 503, 'upstream down: the billing database is in maintenance until 16:00', 1, 2,
  ]);
  expect(failed.switchesOffAt).toBe(new Date(Date.parse(failed.failingSince) + 5 * 24 * HOUR).toISOString());
  expect(Math.abs(Date.parse(failed.warnedAt) - Date.now())).toBeLessThan(30_000);
  const slowHealth = await healthOf(slow.username);
  expect([slowHealth.state, slowHealth.recent.p95Ms, slowHealth.slowMs]).toEqual(['slow', 2_400 + 11 * 31, 2_000]);
  const quietHealth = await healthOf(quiet.username);
  expect([quietHealth.state, quietHealth.stalled]).toEqual(['not-reporting', 1]);
  // The metrics' gauge counts by the same rule: the only endpoints in this database are these four.
  expect(await countEndpoints(h.db.sql, endpointHealthRule(h.config))).toEqual({
    untried: 0, healthy: 1, slow: 1, 'not-reporting': 1, failing: 1, disabled: 0, paused: 0,
  });

  // The Agents rows: each state with its reason, without opening anything.
  await page.goto(`${base}/dashboard/agents`);
  const row = (username: string) => page.locator(`tbody[data-agent="${username}"] > tr`).first();
  await row(failing.username).getByText('Failing since').waitFor();
  const failingRow = await row(failing.username).textContent();
  expect(failingRow).toContain('HTTP 503 upstream down: the billing database is in maintenance until 16:00');
  expect(failingRow).toMatch(/warned 1 of 2 at \d\d:\d\d · switches off /);
  expect(await row(slow.username).textContent()).toContain(`Slow — p95 `);
  expect(digits((await row(slow.username).locator('.badge').textContent())!.split('p95')[1]!)).toBe(String(2_400 + 11 * 31));
  expect(await row(quiet.username).textContent()).toContain('Not reporting — 1 stalled delivery');
  expect(await row(steady.username).locator('.badge').textContent()).toBe('Healthy');
  expect(await axeViolations(page)).toEqual([]);
  await b.screenshot('endpoint-states-agents-desktop');

  // The steady endpoint's detail: the figures as shown are the log's.
  await row(steady.username).getByRole('button', { name: /Manage/ }).click();
  const detail = page.locator(`section.health[aria-labelledby="health-${steady.username}"]`);
  await detail.locator('[data-endpoint-charts] canvas').first().waitFor();
  expect(await detail.locator('[data-figures="recent"] caption').textContent()).toMatch(/^Last 100 attempts, since /);
  for (const [name, value] of [['p50', nearestRank(sorted, 0.5)], ['p95', nearestRank(sorted, 0.95)], ['max', sorted.at(-1)!]] as const) {
    expect(digits(await detail.locator(`[data-figure="${name}"]`).textContent())).toBe(String(value));
  }
  const windowRows = await detail.locator('[data-figures="windows"] tbody tr').allTextContents();
  const day = periodFigures(log, now - 24 * HOUR);
  expect(windowRows.find((r) => r.startsWith('Mean'))!.replace(/[^\d ]/g, ' ').trim().split(/\s+/).at(-1)).toBe(String(day.meanMs));
  expect(windowRows.find((r) => r.startsWith('95 % took under'))).toContain(day.p95UnderMs! >= 1000 ? `${day.p95UnderMs! / 1000} s` : `${day.p95UnderMs} ms`);
  // Legends read without pointing at the chart: the charted attempts' totals, the day's mean and the slowest.
  const charted = log.filter((a) => windowOf(a.at) >= windowOf(now - 24 * HOUR) + WINDOW);
  const legends = (await detail.locator('.u-legend').allTextContents()).map((l) => l.replace(/\s+/g, ' ').trim());
  const answered = charted.filter((a) => a.ok).length;
  expect(legends).toEqual([
    `Time${charted.length} attemptsAnswered 2xx${answered}Failed${charted.length - answered}`,
    `TimeLast dayMean${day.meanMs} msSlowest${Math.max(...charted.map((a) => a.ms)).toLocaleString('en-US')} ms`,
  ]);
  expect(await axeViolations(page)).toEqual([]);
  await detail.scrollIntoViewIfNeeded();
  await b.screenshot('endpoint-figures-detail-desktop');

  // The failing endpoint's detail: the warning, the switch-off to come, the handler's answer.
  await row(failing.username).getByRole('button', { name: /Manage/ }).click();
  const failingDetail = page.locator(`section.health[aria-labelledby="health-${failing.username}"]`);
  await failingDetail.locator('[data-health-notice]').getByText(/Warned 1 of 2 at .* · switches off .* unless it answers 2xx before/).waitFor();
  expect(await failingDetail.locator('[data-failure-body]').textContent()).toBe('upstream down: the billing database is in maintenance until 16:00');
  await b.screenshot('endpoint-failing-detail-desktop');

  await page.setViewportSize({ width: 390, height: 844 });
  const [scroll, client] = await pageWidths(page);
  expect(scroll!).toBeLessThanOrEqual(client!);
  await b.screenshot('endpoint-states-agents-phone');
  // The failing row and its health detail alone, legible at phone size.
  await row(failing.username).screenshot({ path: `${ARTIFACTS}/endpoint-failing-row-phone.png` });
  await failingDetail.screenshot({ path: `${ARTIFACTS}/endpoint-failing-health-phone.png` });
  await detail.screenshot({ path: `${ARTIFACTS}/endpoint-figures-health-phone.png` });
  await page.setViewportSize({ width: 1440, height: 900 });
  await failingDetail.screenshot({ path: `${ARTIFACTS}/endpoint-failing-health-desktop.png` });
  await detail.screenshot({ path: `${ARTIFACTS}/endpoint-figures-health-desktop.png` });

  // The Overview's trouble line carries the reason and the warning too.
  await page.goto(`${base}/dashboard/overview`);
  const line = page.locator(`[data-trouble="${failing.username}"]`);
  await line.waitFor();
  expect(await line.textContent()).toMatch(/HTTP 503 upstream down: the billing database is in maintenance until 16:00.*warned 1 of 2 at \d\d:\d\d · switches off /s);
  await b.screenshot('endpoint-trouble-overview-desktop');
  await page.setViewportSize({ width: 390, height: 844 });
  await b.screenshot('endpoint-trouble-overview-phone');
  await page.setViewportSize({ width: 1440, height: 900 });
}, 120_000);
