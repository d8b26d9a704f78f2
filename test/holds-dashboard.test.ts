import { afterAll, describe, expect, test } from 'bun:test';
import { loadConfig } from '../src/config';
import { holdTasks, HOLD_NOTICES_TASK, EXPIRE_HOLDS_TASK } from '../src/hold-alerts';
import { createLogger } from '../src/log';
import { createMailer } from '../src/mailer';
import { createMetrics } from '../src/metrics';
import { useDashboardHarness } from './support/dashboard';
import { uniqueName, type TestAgent } from './support/harness';
import { readMail, smtpSink } from './support/smtp';

// People decide on held messages from the dashboard API, hear of them by email where SMTP is set
// up, and see them in the metrics; on this file's own database, so that every figure is exact.
const TOKEN = 'scrape-me-0123456789';
const h = useDashboardHarness({ METRICS_TOKEN: TOKEN });
const sink = smtpSink();
afterAll(() => sink.stop());

let cookie = '';
const as = (method: string, path: string, body?: unknown) => h.send(method, `/dashboard/api${path}`, { cookie, body });

// An agent whose messages wait for a person, a recipient with a webhook and one without, and a
// thread between them.
async function heldSetup(name: string) {
  if (!cookie) {
    await h.invite('hold-decider@example.com', 'decider');
    cookie = await h.signIn('hold-decider@example.com');
  }
  const sender = await h.agent(uniqueName(`${name}-sender`));
  const hooked = await h.agent(uniqueName(`${name}-hooked`), { webhookUrl: 'http://127.0.0.1:9/hook' });
  const plain = await h.agent(uniqueName(`${name}-plain`));
  const threadId = await h.thread(sender, [hooked, plain], `${name} thread`);
  await h.post(sender, threadId, 'before the hold');
  await h.db.sql`update agents set holds_messages = true where username = ${sender.username}`;
  return { sender, hooked, plain, threadId };
}

async function postHeld(sender: TestAgent, threadId: string, content: string) {
  const res = await h.call('POST', `/api/threads/${threadId}/messages`, { key: sender.key, body: { content } });
  expect([res.status, res.body.data.held?.reason]).toEqual([202, 'agent']);
  return res.body.data.id as string;
}

const deliveriesOf = (messageId: string) => h.db.sql`select count(*)::int as n from deliveries where message_id = ${messageId}`.then((r) => r[0]!.n);
const doorbellsOf = (messageId: string) =>
  h.db.sql`
    select count(*)::int as n from graphile_worker.jobs j join deliveries d on j.key = 'notify:' || d.id
    where d.message_id = ${messageId}`.then((r) => r[0]!.n);

// The service's scrape (its gauges read the database), or the dashboard app's, which counts the
// decisions made through it.
async function scrape(app: 'service' | 'dashboard' = 'service'): Promise<Map<string, number>> {
  const res =
    app === 'service' ? await h.call('GET', '/metrics', { key: TOKEN }) : await h.send('GET', '/metrics', { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  const samples = new Map<string, number>();
  for (const line of String(res.body).split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (match) samples.set(match[1]!, Number(match[2]));
  }
  return samples;
}

describe('the dashboard API', () => {
  test('lists what waits, oldest first, paged and filtered, with why, to whom and the context', async () => {
    const { sender, hooked, plain, threadId } = await heldSetup('list');
    const first = await postHeld(sender, threadId, 'first held\nwith a second line');
    const second = await postHeld(sender, threadId, 'second held');
    const page1 = await as('GET', `/holds?limit=1&threadId=${threadId}`);
    expect(page1.status).toBe(200);
    const [item] = page1.body.data.items;
    expect(item).toEqual({
      id: first,
      threadId,
      threadTitle: 'list thread',
      sender: sender.username,
      recipients: [hooked.username, plain.username].sort(),
      summary: null,
      content: 'first held\nwith a second line',
      reason: 'agent',
      createdAt: expect.any(String),
      expiresAt: expect.any(String),
      context: [{ sender: sender.username, line: 'before the hold', createdAt: expect.any(String) }],
    });
    expect(Date.parse(item.expiresAt) - Date.parse(item.createdAt)).toBe(168 * 3_600_000);
    expect(page1.body.data.next).toBe(first);
    const page2 = await as('GET', `/holds?limit=1&threadId=${threadId}&after=${first}`);
    expect([page2.body.data.items.map((m: { id: string }) => m.id), page2.body.data.next]).toEqual([[second], null]);
    const bySender = await as('GET', `/holds?sender=${sender.username}`);
    expect(bySender.body.data.items.map((m: { id: string }) => m.id)).toEqual([first, second]);
    expect((await as('GET', '/holds?sender=nobody-at-all')).body.data).toEqual({ items: [], next: null });

    const bad = await as('GET', '/holds?after=not-an-id');
    expect([bad.status, bad.body.success, bad.body.error]).toEqual([400, false, 'after must be an id taken from the list']);
    expect((await h.send('GET', '/dashboard/api/holds')).status).toBe(401);
    await as('POST', '/holds/reject', { messageIds: [first, second], reason: 'listed only' });
  });

  test('approving writes the deliveries and the doorbell jobs; rejecting writes none and keeps the reason', async () => {
    const { sender, threadId } = await heldSetup('decide');
    const yes = await postHeld(sender, threadId, 'please send');
    const no = await postHeld(sender, threadId, 'please do not');
    expect([await deliveriesOf(yes), await deliveriesOf(no)]).toEqual([0, 0]);

    const approved = await as('POST', '/holds/approve', { messageIds: [yes] });
    expect([approved.status, approved.body.data]).toEqual([200, { approved: [yes], rejected: [] }]);
    expect([await deliveriesOf(yes), await doorbellsOf(yes)]).toEqual([2, 1]);
    const [message] = await h.db.sql`select sender, content from messages where id = ${yes}`;
    expect(message).toEqual({ sender: sender.username, content: 'please send' });

    const noReason = await as('POST', '/holds/reject', { messageIds: [no], reason: '  ' });
    expect([noReason.status, noReason.body.error]).toEqual([400, 'reason must be 1 to 500 characters: the sender is told it']);
    const rejected = await as('POST', '/holds/reject', { messageIds: [no], reason: 'Not to customers.' });
    expect([rejected.status, rejected.body.data]).toEqual([200, { approved: [], rejected: [{ id: no, reason: 'Not to customers.' }] }]);
    expect([await deliveriesOf(no), (await h.db.sql`select 1 from messages where id = ${no}`).length]).toEqual([0, 0]);
    const stored = await h.db.sql`
      select id, state, decided_by_name, rejection_reason from held_messages where id in (${yes}, ${no}) order by id`;
    expect([...stored]).toEqual([
      { id: yes, state: 'approved', decided_by_name: 'decider', rejection_reason: null },
      { id: no, state: 'rejected', decided_by_name: 'decider', rejection_reason: 'Not to customers.' },
    ]);
    const audit = await h.db.sql`select action, actor, subject, reason from audit_events where subject in (${yes}, ${no}) order by subject`;
    expect([...audit]).toEqual([
      { action: 'message.approve', actor: 'decider', subject: yes, reason: null },
      { action: 'message.reject', actor: 'decider', subject: no, reason: 'Not to customers.' },
    ]);
    // Decided already: a second decision changes nothing and names nothing.
    expect((await as('POST', '/holds/approve', { messageIds: [no] })).body.data).toEqual({ approved: [], rejected: [] });
    expect(await deliveriesOf(no)).toBe(0);
    const badIds = await as('POST', '/holds/approve', { messageIds: [] });
    expect([badIds.status, badIds.body.error]).toEqual([400, 'messageIds must be 1 to 1000 ids of waiting messages']);
  });

  test('approving all from a sender sends each of its waiting messages, and only its', async () => {
    const { sender, threadId } = await heldSetup('all');
    const other = await heldSetup('all-other');
    const ids = [await postHeld(sender, threadId, 'one'), await postHeld(sender, threadId, 'two')];
    const untouched = await postHeld(other.sender, other.threadId, 'not this one');
    const res = await as('POST', '/holds/approve-all', { sender: sender.username });
    expect([res.status, res.body.data]).toEqual([200, { approved: ids, rejected: [] }]);
    expect([await deliveriesOf(ids[0]!), await deliveriesOf(ids[1]!), await deliveriesOf(untouched)]).toEqual([2, 2, 0]);
    const unknown = await as('POST', '/holds/approve-all', { sender: 'no-such-agent' });
    expect([unknown.status, unknown.body.error]).toEqual([404, 'No agent named no-such-agent.']);
    const missing = await as('POST', '/holds/approve-all', {});
    expect([missing.status, missing.body.error]).toEqual([400, 'sender must be the username of the agent whose waiting messages to approve']);
    await as('POST', '/holds/reject', { messageIds: [untouched], reason: 'clean up' });
  });

  test('the Overview and the navigation count what waits and name the paused threads', async () => {
    const { sender, threadId } = await heldSetup('overview');
    const held = await postHeld(sender, threadId, 'count me');
    await h.db.sql`update threads set paused_at = now() where id = ${threadId}`;
    const overview = await as('GET', '/overview');
    const [paused] = await h.db.sql`select paused_at from threads where id = ${threadId}`;
    expect(overview.body.data.holds).toEqual({ waiting: 1, paused: [{ threadId, title: 'overview thread', pausedAt: paused!.paused_at.toISOString() }] });
    const attention = await as('GET', '/attention');
    expect([attention.body.data.waiting, attention.body.data.paused]).toEqual([1, 1]);
    await as('POST', '/holds/reject', { messageIds: [held], reason: 'done' });
    await h.db.sql`update threads set paused_at = null where id = ${threadId}`;
    expect((await as('GET', '/overview')).body.data.holds).toEqual({ waiting: 0, paused: [] });
  });
});

describe('metrics', () => {
  test('what waits, for how long, the paused threads, and the decisions made', async () => {
    const before = await scrape('dashboard');
    const { sender, threadId } = await heldSetup('metrics');
    const a = await postHeld(sender, threadId, 'a');
    const b = await postHeld(sender, threadId, 'b');
    const c = await postHeld(sender, threadId, 'c');
    await h.db.sql`update held_messages set created_at = now() - interval '2 hours' where id = ${a}`;
    await h.db.sql`update threads set paused_at = now() where id = ${threadId}`;
    const during = await scrape();
    expect([during.get('ams_holds_waiting'), during.get('ams_threads_paused')]).toEqual([3, 1]);
    expect(during.get('ams_holds_oldest_age_seconds')).toBeGreaterThanOrEqual(7200);
    expect(during.get('ams_holds_oldest_age_seconds')).toBeLessThan(7260);

    await as('POST', '/holds/approve', { messageIds: [a] });
    await as('POST', '/holds/reject', { messageIds: [b], reason: 'no' });
    // The expiry sweep, as the worker's crontab runs it, with its own process's metrics.
    await h.db.sql`update held_messages set expires_at = now() - interval '1 second' where id = ${c}`;
    const sweepMetrics = createMetrics();
    await holdTasks({ sql: h.db.sql, log: createLogger('error', () => {}), metrics: sweepMetrics, mailer: null, holdHours: 168 })[EXPIRE_HOLDS_TASK]!({}, {} as never);
    expect(await sweepMetrics.render()).toContain('ams_hold_decisions_total{decision="expired"} 1');
    const [expired] = await h.db.sql`select state, decided_by_name, rejection_reason from held_messages where id = ${c}`;
    expect(expired).toEqual({ state: 'rejected', decided_by_name: 'service', rejection_reason: 'No person decided within 168 hours, so the message was rejected and not sent.' });

    const counted = await scrape('dashboard');
    const decided = (s: Map<string, number>, d: string) => s.get(`ams_hold_decisions_total{decision="${d}"}`)!;
    expect(['approved', 'rejected', 'expired'].map((d) => decided(counted, d) - decided(before, d))).toEqual([1, 1, 0]);
    const after = await scrape();
    expect([after.get('ams_holds_waiting'), after.get('ams_holds_oldest_age_seconds'), after.get('ams_threads_paused')]).toEqual([0, 0, 1]);
    await h.db.sql`update threads set paused_at = null where id = ${threadId}`;
  });
});

describe('email', () => {
  const config = loadConfig({ DATABASE_URL: 'postgres://unused', SMTP_URL: sink.url, SMTP_FROM: 'ams@example.com' });
  const lines: Record<string, any>[] = [];
  const log = createLogger('info', (line) => lines.push(JSON.parse(line)));
  const notices = (mailer = createMailer(config, log)) =>
    holdTasks({ sql: h.db.sql, log, mailer, publicUrl: 'https://ams.example.com', holdHours: 168 })[HOLD_NOTICES_TASK]!({}, {} as never);
  const sentEvents = () => lines.filter((l) => l.event.endsWith('_mail_sent')).map((l) => [l.event, l.email]);

  test('one digest for several holds within the interval, to every person, and a new one only after it', async () => {
    const { sender, threadId } = await heldSetup('digest');
    await h.invite('second-person@example.com', 'second');
    const people = (await h.db.sql`select email from people order by email`).map((r) => r.email as string);
    const first = await postHeld(sender, threadId, 'Ship the release notes');
    await postHeld(sender, threadId, 'And the changelog');

    // Without SMTP nothing is sent, and nothing is marked as told.
    await notices(null);
    expect((await h.db.sql`select count(*)::int as n from held_messages where noticed_at is not null`)[0]!.n).toBe(0);

    await Promise.all([notices(), notices()]);
    await sink.waitFor(() => sink.received.length === people.length);
    expect(sink.received.map((m) => m.to).flat().sort()).toEqual(people);
    const mail = readMail(sink.received[0]!);
    expect(mail.subject).toBe('2 messages wait for your approval');
    expect(mail.text).toContain(`- ${sender.username} in "digest thread" (its sender is held): Ship the release notes`);
    expect(mail.text).toContain("Decide on the dashboard's Overview: https://ams.example.com/dashboard/overview");

    // Each person's mail links each message once: signed in, the link opens its decision, once.
    const mine = readMail(sink.received.find((m) => [m.to].flat().includes('hold-decider@example.com'))!);
    const theirs = readMail(sink.received.find((m) => [m.to].flat().includes('second-person@example.com'))!);
    const linkIn = (text: string) => new URL(/Decide \(one-time link; you sign in as usual\): (\S+)/.exec(text)![1]!).pathname;
    const link = linkIn(mine.text);
    expect(link).toMatch(/^\/dashboard\/holds\/link\/[A-Za-z0-9_-]{32}$/);
    expect(linkIn(theirs.text)).not.toBe(link);
    const open = (path: string, withCookie: string | null) => h.send('GET', path, { cookie: withCookie });
    const anonymous = await open(link, null);
    expect([anonymous.status, anonymous.headers.get('location')]).toEqual([303, `/dashboard/sign-in?next=${encodeURIComponent(link)}`]);
    const opened = await open(link, cookie);
    expect([opened.status, opened.headers.get('location')]).toEqual([303, `/dashboard/overview#hold-${first}`]);
    const again = await open(link, cookie);
    expect([again.status, again.headers.get('location')]).toEqual([303, '/dashboard/overview?link=spent']);
    // Another person's link is not this person's to spend, and stays unspent for them.
    expect((await open(linkIn(theirs.text), cookie)).headers.get('location')).toBe('/dashboard/overview?link=spent');
    expect((await h.db.sql`select count(*)::int as n from hold_links where used_at is null and message_id = ${first}`)[0]!.n).toBe(1);

    // A third within the interval: no email now.
    await postHeld(sender, threadId, 'One more thing');
    await notices();
    await Bun.sleep(100);
    expect(sink.received.length).toBe(people.length);
    // The interval over: one digest for what waits now.
    await h.db.sql`update hold_notices set sent_at = now() - interval '16 minutes'`;
    await notices();
    await sink.waitFor(() => sink.received.length === 2 * people.length);
    expect(readMail(sink.received.at(-1)!).subject).toBe('3 messages wait for your approval');
    // Nothing new waits: no email, however long since the last.
    await h.db.sql`update hold_notices set sent_at = now() - interval '16 minutes'`;
    await notices();
    await Bun.sleep(100);
    expect(sink.received.length).toBe(2 * people.length);
    await as('POST', '/holds/reject', { messageIds: (await as('GET', `/holds?threadId=${threadId}`)).body.data.items.map((m: { id: string }) => m.id), reason: 'done' });
    expect((await as('GET', `/holds?sender=${sender.username}`)).body.data.items).toEqual([]);
    expect((await h.db.sql`select state from held_messages where id = ${first}`)[0]!.state).toBe('rejected');
  });

  test('an instance that finds another sending the digest waits for it, then sends none', async () => {
    const { sender, threadId } = await heldSetup('race');
    await h.db.sql`update hold_notices set sent_at = now() - interval '16 minutes'`;
    sink.received.length = 0;
    const held = await postHeld(sender, threadId, 'arrives while another instance sends');
    let other: unknown;
    // Another instance, between claiming the digest and marking it sent.
    await h.db.sql.begin(async (tx) => {
      await tx`select 1 from hold_notices where kind = 'waiting' for update`;
      other = notices();
      await Bun.sleep(200);
      await tx`update hold_notices set sent_at = now() where kind = 'waiting'`;
    });
    await other;
    await Bun.sleep(100);
    expect(sink.received).toEqual([]);
    expect((await h.db.sql`select noticed_at from held_messages where id = ${held}`)[0]!.noticed_at).toBeNull();
    await as('POST', '/holds/reject', { messageIds: [held], reason: 'done' });
  });

  test('each pause by the loop breaker is emailed once, with a link to the thread', async () => {
    const { threadId } = await heldSetup('paused');
    sink.received.length = 0;
    await h.db.sql`update threads set paused_at = now() where id = ${threadId}`;
    await Promise.all([notices(), notices()]);
    const people = (await h.db.sql`select count(*)::int as n from people`)[0]!.n;
    await sink.waitFor(() => sink.received.length === people);
    const mail = readMail(sink.received[0]!);
    expect(mail.subject).toBe('Thread paused by the loop breaker: paused thread');
    expect(mail.text).toContain(`https://ams.example.com/dashboard/threads/${threadId}`);
    await notices();
    await Bun.sleep(100);
    expect(sink.received.length).toBe(people);
    // Resumed, then paused again: a new pause, a new email.
    await h.db.sql`update threads set paused_at = null where id = ${threadId}`;
    await notices();
    await h.db.sql`update threads set paused_at = now() where id = ${threadId}`;
    await notices();
    await sink.waitFor(() => sink.received.length === 2 * people);
    expect(sink.received.map((m) => readMail(m).subject)).toEqual(Array(2 * people).fill('Thread paused by the loop breaker: paused thread'));
    // The sender logs each once the relay accepted it.
    while (sentEvents().filter(([event]) => event === 'thread_paused_mail_sent').length < 2 * people) await Bun.sleep(10);
    await h.db.sql`update threads set paused_at = null where id = ${threadId}`;
  });
});
