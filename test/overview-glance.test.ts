import { expect, test } from 'bun:test';
import { overview } from '../src/domain/deliveries/overview';
import { useDashboardHarness } from './support/dashboard';
import { onPrimary } from '../src/db/connect';

// The Overview at a glance (src/domain/deliveries/overview.ts) and the lists behind it: headline
// figures against what the database holds, charts binned as finely as the data there is, every
// webhook in trouble counted, grouped and read a page at a time; the Agents list narrowed and
// ordered by webhook health (agent-overview.ts); and the named agents whose webhook is in trouble,
// for the pages that list their deliveries. Health rows are written as the worker leaves them.
const h = useDashboardHarness();
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const STALLED_AFTER_MS = 300_000;
// The service's defaults: warned after an hour and a day, switched off after five days, slow above 2 s.
const READING = { warnAfterMs: [3_600_000, 86_400_000], disableAfterMs: 432_000_000, slowMs: 2_000, stalledAfterMs: STALLED_AFTER_MS };
const floorTo = (ms: number, step: number) => Math.floor(ms / step) * step;

let cookie = '';
const dash = async (path: string) => h.send('GET', `/dashboard/api${path}`, { cookie });

test('the charts start at the day\'s first delivery, in bins as fine as the data there is, and say what is waiting for what', async () => {
  await h.invite('olga@example.com', 'olga');
  cookie = await h.signIn('olga@example.com');
  const now = new Date();
  const empty = await overview(onPrimary(h.db.sql), READING, now);
  // Nothing yet: the whole day, by hour.
  expect([empty.binMinutes, empty.bins.length, empty.bins[0]!.at, empty.headline.deliveries]).toEqual([60, 24, empty.since, 0]);

  const writer = await h.agent('glance-writer');
  const poller = await h.agent('glance-poller');
  const threadId = await h.thread(writer, [poller], 'Glance');
  const { id: messageId } = await h.post(writer, threadId, 'a fresh one');
  // A fresh service: six five-minute bins, the last one now's, the delivery in it waiting for a poll.
  const fresh = await overview(onPrimary(h.db.sql), READING, now);
  expect([fresh.binMinutes, fresh.bins.length]).toEqual([5, 6]);
  expect(Date.parse(fresh.bins.at(-1)!.at)).toBe(floorTo(now.getTime(), 5 * MINUTE));
  expect(fresh.bins.at(-1)).toMatchObject({ waitingForPoll: 1, doorbellOwed: 0, retrying: 0, notified: 0, delivered: 0, fetched: 0, failed: 0 });
  expect(fresh.headline).toMatchObject({ deliveries: 1, failed: 0, stalledAgents: 0 });

  // Three hours of data: quarter hours from the first; ten hours: hours from the first.
  for (const [agoMs, minutes] of [[3 * HOUR, 15], [10 * HOUR, 60]] as const) {
    await h.db.sql`update deliveries set created_at = ${new Date(now.getTime() - agoMs)} where message_id = ${messageId}`;
    const seen = await overview(onPrimary(h.db.sql), READING, now);
    const step = minutes * MINUTE;
    const first = floorTo(now.getTime() - agoMs, step);
    expect([seen.binMinutes, Date.parse(seen.bins[0]!.at), seen.bins.length]).toEqual([minutes, first, (floorTo(now.getTime(), step) - first) / step + 1]);
    expect(seen.bins[0]!.waitingForPoll).toBe(1);
  }

  // Through the dashboard's API, in its envelope, with the same figures.
  const res = await dash('/overview');
  expect(res.status).toBe(200);
  expect(Object.keys(res.body.data).sort()).toEqual([
    'binMinutes', 'bins', 'closeRequests', 'doorbellP50Ms', 'doorbellP95Ms', 'headline', 'holds', 'since', 'stalledAgents', 'trouble',
    'troubleGroups', 'troubleTotal',
  ]);
  expect(res.body.data.headline).toEqual({
    deliveries: 1, failed: 0, attempts: 0, attemptsFailed: 0, endpoints: { untried: 0, healthy: 0, failing: 0, disabled: 0, paused: 0, slow: 0, 'not-reporting': 0 }, stalledAgents: 0,
  });
});

// Thirteen webhooks in trouble, as in a broad outage: nine answering 503 (two of them switched
// off), four refusing connections; beside them one healthy, one never tried, and polling agents.
const TROUBLED = Array.from({ length: 13 }, (_, i) => `trouble-${String(i + 1).padStart(2, '0')}`);
const DISABLED = ['trouble-08', 'trouble-09'];

async function broadOutage() {
  for (const [i, username] of TROUBLED.entries()) {
    await h.agent(username, { webhookUrl: `http://127.0.0.1:9/${username}` });
    const refused = i >= 9;
    // trouble-01 has failed longest.
    const since = new Date(Date.now() - (20 - i) * HOUR);
    await h.db.sql`
      insert into endpoint_health (agent_id, last_failure_at, last_failure_status, last_failure_error, consecutive_failures, failing_since)
      select id, now(), ${refused ? null : 503}, ${refused ? 'connection failed (ECONNREFUSED): connect ECONNREFUSED 127.0.0.1:9' : null}, 5, ${since}
      from agents where username = ${username}`;
  }
  await h.db.sql`
    update agents set webhook_disabled_at = now(), webhook_disabled_reason = 'It answered no attempt with 2xx for 5 days, so no more doorbells were sent and the agent polls instead.',
      webhook_failing_since = (select failing_since from endpoint_health where agent_id = agents.id)
    where username = any(${DISABLED})`;
  await h.agent('fine-hook', { webhookUrl: 'http://127.0.0.1:9/fine' });
  await h.db.sql`insert into endpoint_health (agent_id, last_success_at) select id, now() from agents where username = 'fine-hook'`;
  await h.agent('new-hook', { webhookUrl: 'http://127.0.0.1:9/new' });
}

// Switched off first, then longest failing first.
const TROUBLE_ORDER = [...DISABLED, ...TROUBLED.filter((u) => !DISABLED.includes(u))];

test('every webhook in trouble is counted, grouped by what fails, and read in full a page at a time', async () => {
  await broadOutage();
  const seen = (await dash('/overview')).body.data;
  expect(seen.troubleTotal).toBe(13);
  expect(seen.troubleGroups).toEqual([
    { failure: 'HTTP 503', endpoints: 9, disabled: 2 },
    { failure: 'connection failed (ECONNREFUSED)', endpoints: 4, disabled: 0 },
  ]);
  expect(seen.trouble.map((t: { username: string }) => t.username)).toEqual(TROUBLE_ORDER.slice(0, 10));
  expect(seen.headline.endpoints).toEqual({ untried: 1, healthy: 1, failing: 11, disabled: 2, paused: 0, slow: 0, 'not-reporting': 0 });

  // All of them, five at a time, in the same order; the last page says there is no next.
  const read: string[] = [];
  let after: string | null = null;
  const pages: number[] = [];
  do {
    const res = await dash(`/overview/trouble?limit=5${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    expect(res.status).toBe(200);
    read.push(...res.body.data.items.map((t: { username: string }) => t.username));
    pages.push(res.body.data.items.length);
    after = res.body.data.next;
  } while (after);
  expect([pages, read]).toEqual([[5, 5, 3], TROUBLE_ORDER]);
  const first = (await dash('/overview/trouble')).body.data;
  expect([first.items.length, first.next]).toEqual([13, null]);
  expect(first.items[0]).toMatchObject({ username: 'trouble-08', state: 'disabled', failure: 'HTTP 503', deliveries: 0 });
  expect(first.items.at(-1)).toMatchObject({ username: 'trouble-13', state: 'failing', failure: 'connection failed (ECONNREFUSED)' });

  const bad = await dash('/overview/trouble?after=nonsense');
  expect([bad.status, bad.body]).toEqual([400, { success: false, code: 'invalid', field: 'after', error: 'after must be a cursor taken from the list' }]);
});

test('the Agents list narrows to webhook states and puts the webhooks in trouble first, paged by key', async () => {
  const names = async (path: string) => {
    const res = await dash(path);
    expect(res.status).toBe(200);
    return res.body.data.items.map((a: { username: string }) => a.username);
  };
  expect((await names('/agents?health=failing')).sort()).toEqual(TROUBLED.filter((u) => !DISABLED.includes(u)));
  expect((await names('/agents?health=disabled')).sort()).toEqual(DISABLED);
  expect(await names('/agents?health=healthy')).toEqual(['fine-hook']);
  expect(await names('/agents?health=untried')).toEqual(['new-hook']);
  expect((await names('/agents?health=none')).sort()).toEqual(['glance-poller', 'glance-writer']);

  // Trouble first: switched off, then failing, each newest first; then never tried, healthy, and
  // the agents without a webhook. Read three at a time, the same as read at once.
  const newestFirst = (list: string[]) => [...list].reverse();
  const expected = [
    ...newestFirst(DISABLED),
    ...newestFirst(TROUBLED.filter((u) => !DISABLED.includes(u))),
    'new-hook',
    'fine-hook',
    'glance-poller',
    'glance-writer',
  ];
  expect(await names('/agents?sort=trouble&limit=100')).toEqual(expected);
  const paged: string[] = [];
  let after: string | null = null;
  do {
    const res = await dash(`/agents?sort=trouble&limit=3${after ? `&after=${after}` : ''}`);
    paged.push(...res.body.data.items.map((a: { username: string }) => a.username));
    after = res.body.data.next;
  } while (after);
  expect(paged).toEqual(expected);
  // The live refresh's `since`: from the top down to an agent shown, inclusive.
  const top = (await dash('/agents?sort=trouble&limit=4')).body.data.items;
  expect(await names(`/agents?sort=trouble&since=${top[3].cursor}`)).toEqual(expected.slice(0, 4));
  expect(await names('/agents?sort=trouble&health=disabled,failing&q=trouble-1')).toEqual(['trouble-13', 'trouble-12', 'trouble-11', 'trouble-10']);

  for (const [path, field, error] of [
    ['/agents?health=sick', 'health', 'health must be one or more of failing, disabled, paused, slow, not-reporting, healthy, untried, none, separated by commas'],
    ['/agents?sort=oldest', 'sort', 'sort must be newest or trouble'],
    [`/agents?sort=trouble&after=${top[0].id}`, 'after', 'after must be a cursor taken from the list'],
  ] as const) {
    const res = await dash(path);
    expect([path, res.status, res.body]).toEqual([path, 400, { success: false, code: 'invalid', field, error }]);
  }
});

test('of the agents named, those whose webhook is in trouble are told, with when and why', async () => {
  const res = await dash('/webhook-trouble?agents=trouble-08,trouble-10,fine-hook,new-hook,glance-poller,nobody');
  expect(res.status).toBe(200);
  const [off, failing] = res.body.data;
  expect(res.body.data.map((t: { username: string; state: string }) => [t.username, t.state])).toEqual([
    ['trouble-08', 'disabled'],
    ['trouble-10', 'failing'],
  ]);
  const [row] = await h.db.sql<{ disabledAt: Date; failingSince: Date }[]>`
    select a.webhook_disabled_at as "disabledAt", h.failing_since as "failingSince" from agents a join endpoint_health h on h.agent_id = a.id where a.username = 'trouble-08'`;
  expect(off).toEqual({
    username: 'trouble-08',
    state: 'disabled',
    failure: 'HTTP 503',
    failingSince: row!.failingSince.toISOString(),
    disabledAt: row!.disabledAt.toISOString(),
    disabledReason: 'It answered no attempt with 2xx for 5 days, so no more doorbells were sent and the agent polls instead.',
  });
  expect(failing).toMatchObject({ failure: 'connection failed (ECONNREFUSED)', disabledAt: null, disabledReason: null });
  const none = await dash('/webhook-trouble');
  expect([none.status, none.body.error]).toEqual([400, 'agents must name one or more agents, separated by commas']);
  const many = await dash(`/webhook-trouble?agents=${Array.from({ length: 101 }, (_, i) => `a${i}`).join(',')}`);
  expect([many.status, many.body.error]).toEqual([400, 'agents may name at most 100 agents']);
});

test('the headline counts the day as the database holds it: Failed deliveries, attempts not answered 2xx, stalled agents', async () => {
  const writer = await h.agent('headline-writer');
  const readers = [await h.agent('headline-a'), await h.agent('headline-b')];
  const threadId = await h.thread(writer, readers, 'Headline');
  for (let i = 0; i < 4; i++) await h.post(writer, threadId, `note ${i}`);
  const ids = (await h.db.sql<{ id: string; username: string }[]>`
    select d.id, a.username from deliveries d join agents a on a.id = d.recipient_id where d.thread_id = ${threadId} order by d.id`);
  const of = (username: string) => ids.filter((d) => d.username === username).map((d) => d.id);
  const [a, b] = [of('headline-a'), of('headline-b')];
  // Three Failed; two stalled at headline-a, one at headline-b (notified ten minutes ago, never reported).
  await h.db.sql`update deliveries set step = 'failed', failed_step = 'accepted', error = 'HTTP 500' where id = any(${[a[0]!, a[1]!, b[0]!]}::uuid[])`;
  await h.db.sql`update deliveries set step = 'notified', webhook = true, notified_at = now() - interval '10 minutes'
                 where id = any(${[a[2]!, a[3]!, b[1]!]}::uuid[])`;
  // Attempts: 30 in the day at one endpoint (24 answered 2xx), 10 at another; 50 older than a day, not counted.
  await h.db.sql`
    insert into endpoint_attempt_windows (agent_id, window_start, attempts, successes, latency_buckets)
    select a.id, w.start, w.attempts, w.successes, array[w.attempts, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    from agents a, (values ('fine-hook', now() - interval '2 hours', 30, 24), ('new-hook', now() - interval '23 hours', 10, 10),
                           ('fine-hook', now() - interval '25 hours', 50, 0)) as w(username, start, attempts, successes)
    where a.username = w.username`;
  const [day] = await h.db.sql<{ deliveries: number; failed: number }[]>`
    select count(*)::int as deliveries, (count(*) filter (where step = 'failed'))::int as failed
    from deliveries where created_at >= ${new Date(floorTo(Date.now(), HOUR) - 23 * HOUR)}`;
  const seen = (await dash('/overview')).body.data;
  expect(seen.headline).toEqual({
    deliveries: day!.deliveries,
    failed: 3,
    attempts: 40,
    attemptsFailed: 6,
    endpoints: { untried: 1, healthy: 1, failing: 11, disabled: 2, paused: 0, slow: 0, 'not-reporting': 0 },
    stalledAgents: 2,
  });
  expect(day!.deliveries).toBe(1 + 8);
  expect(seen.stalledAgents.map((s: { username: string; stalled: number }) => [s.username, s.stalled])).toEqual([['headline-a', 2], ['headline-b', 1]]);
});
