import { expect, test } from 'bun:test';
import { createLogger } from '../src/log';
import { lossAuditor, startLossAudit } from '../src/domain/deliveries/loss-audit';
import { firstIdAt } from '../src/domain/shared/ids';
import { uniqueName, useHarness } from './support/harness';
import { eventually } from './support/receiver';
import { post } from './support/webhooks';

// The live loss audit on this file's own database, with no worker running, so that doorbell jobs
// stay where a test puts them. Each kind of loss is made by hand and must be counted.
const TOKEN = 'operator-token-0123456789';
const h = useHarness({ METRICS_TOKEN: TOKEN, LOSS_AUDIT_INTERVAL_MS: '100', LOSS_AUDIT_AFTER_MS: '60000' });

const details = async () => {
  const res = await h.call('GET', '/health/details', { key: TOKEN });
  expect(res.status).toBe(200);
  return res.body.data;
};
const auditShows = (expected: Record<string, number>) =>
  eventually(async () => {
    const { lossAudit } = await details();
    const { checkedAt: _, ...counts } = lossAudit ?? {};
    return JSON.stringify(counts) === JSON.stringify(expected) ? lossAudit : null;
  });
const NONE = { messagesWithoutDeliveries: 0, doorbellsWithoutJob: 0, doorbellsOverdue: 0 };

test('/health/details needs the operator token', async () => {
  const res = await h.call('GET', '/health/details');
  expect([res.status, res.body]).toEqual([401, { success: false, error: 'Send the operator token: "Authorization: Bearer <METRICS_TOKEN>".' }]);
  const agent = await h.agent(uniqueName('curious'));
  expect((await h.call('GET', '/health/details', { key: agent.key })).status).toBe(401);
});

test('a healthy service shows no drift', async () => {
  const sender = await h.agent(uniqueName('sender'));
  const hooked = await h.agent(uniqueName('hooked'), { webhookUrl: 'http://127.0.0.1:9/hook' });
  await post(h, sender, hooked, { content: 'queued, not yet rung' });
  const audit = await auditShows(NONE);
  expect(Date.now() - new Date(audit.checkedAt).getTime()).toBeLessThan(60_000);
  expect((await details()).database).toBe('ok');
});

test('each kind of loss is counted, on /health/details and in the metrics, and clears when repaired', async () => {
  const sender = await h.agent(uniqueName('sender'));
  const hooked = await h.agent(uniqueName('hooked'), { webhookUrl: 'http://127.0.0.1:9/hook' });
  // A message whose deliveries never were.
  const threadId = await h.thread(sender, [hooked]);
  const [lost] = await h.db.sql`insert into messages (thread_id, sender_agent_id, sender, content) values (${threadId}, null, 'nobody', 'lost') returning id`;
  // An owed doorbell whose job vanished, older than the threshold.
  const stranded = await post(h, sender, hooked, { content: 'stranded' });
  await h.db.sql`delete from graphile_worker._private_jobs where key = ${`notify:${stranded.deliveryId}`}`;
  await h.db.sql`update deliveries set created_at = now() - interval '10 minutes' where id = ${stranded.deliveryId}`;
  // An owed doorbell whose job fell due long ago and that no worker took.
  const overdue = await post(h, sender, hooked, { content: 'overdue' });
  await h.db.sql`update graphile_worker._private_jobs set run_at = now() - interval '10 minutes' where key = ${`notify:${overdue.deliveryId}`}`;

  await auditShows({ messagesWithoutDeliveries: 1, doorbellsWithoutJob: 1, doorbellsOverdue: 1 });
  const metrics = await h.call('GET', '/metrics', { key: TOKEN });
  expect(String(metrics.body)).toContain('ams_loss_audit_drift{check="messages_without_deliveries"} 1');
  expect(String(metrics.body)).toContain('ams_loss_audit_drift{check="doorbells_without_job"} 1');
  expect(String(metrics.body)).toContain('ams_loss_audit_drift{check="doorbells_overdue"} 1');

  // A stranded doorbell that is no longer owed (acknowledged meanwhile) is no loss.
  await h.db.sql`update deliveries set acknowledged_at = now() where id = ${stranded.deliveryId}`;
  await h.db.sql`delete from messages where id = ${lost!.id}`;
  await h.db.sql`update graphile_worker._private_jobs set run_at = now() where key = ${`notify:${overdue.deliveryId}`}`;
  await auditShows(NONE);
});

test('drift is logged as an error with its counts', async () => {
  const lines: Record<string, unknown>[] = [];
  const sender = await h.agent(uniqueName('sender'));
  const other = await h.agent(uniqueName('other'));
  const threadId = await h.thread(sender, [other]);
  const [lost] = await h.db.sql`insert into messages (thread_id, sender, content) values (${threadId}, 'nobody', 'lost') returning id`;
  const auditor = startLossAudit(h.db.sql, createLogger('info', (l) => lines.push(JSON.parse(l))), {
    intervalMs: 60_000,
    thresholdMs: 60_000,
    windowMs: 3_600_000,
  });
  try {
    await eventually(async () => lines.length > 0);
    expect(lines).toHaveLength(1);
    const { time: _, checkedAt, ...line } = lines[0]!;
    expect(line).toEqual({ level: 'error', event: 'loss_audit_drift', messagesWithoutDeliveries: 1, doorbellsWithoutJob: 0, doorbellsOverdue: 0 });
    expect(typeof checkedAt).toBe('string');
    await h.db.sql`delete from messages where id = ${lost!.id}`;
    expect(await auditor.run()).toMatchObject(NONE);
    expect(lines).toHaveLength(1);
  } finally {
    auditor.stop();
  }
});

// A run reads the messages given their id since shortly before the previous run, and the lost it
// found before; the whole window once an hour. So a delivery deleted by hand from an older message
// is found by the next whole-window run, not by the runs between.
test('runs check the newer messages and the lost ones again; the whole window is checked each hour', async () => {
  const sender = await h.agent(uniqueName('sender'));
  const other = await h.agent(uniqueName('other'));
  const threadId = await h.thread(sender, [other]);
  const [old] = await h.db.sql<{ id: string }[]>`
    with m as (
      insert into messages (id, thread_id, sender, content)
      values (${firstIdAt(Date.now() - 2 * 3_600_000)}, ${threadId}, 'sender', 'two hours old') returning id, thread_id
    )
    insert into deliveries (message_id, thread_id, recipient_id, webhook)
    select m.id, m.thread_id, a.id, false from m, agents a where a.username = ${other.username}
    returning message_id as id`;
  const options = { intervalMs: 60_000, thresholdMs: 60_000, windowMs: 86_400_000 };
  const quiet = createLogger('info', () => {});
  const hourly = lossAuditor(h.db.sql, quiet, options);
  try {
    expect(await hourly.run()).toMatchObject(NONE);
    await h.db.sql`delete from deliveries where message_id = ${old!.id}`;
    expect(await hourly.run()).toMatchObject(NONE);
    expect(await lossAuditor(h.db.sql, quiet, { ...options, wholeWindowEveryMs: 0 }).run()).toMatchObject({ ...NONE, messagesWithoutDeliveries: 1 });

    const [lost] = await h.db.sql<{ id: string }[]>`insert into messages (thread_id, sender, content) values (${threadId}, 'nobody', 'lost') returning id`;
    expect(await hourly.run()).toMatchObject({ ...NONE, messagesWithoutDeliveries: 1 });
    expect(await hourly.run()).toMatchObject({ ...NONE, messagesWithoutDeliveries: 1 });
    await h.db.sql`delete from messages where id = ${lost!.id}`;
    expect(await hourly.run()).toMatchObject(NONE);
  } finally {
    await h.db.sql`delete from messages where id = ${old!.id}`;
  }
});
