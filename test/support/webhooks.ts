import { createHmac } from 'node:crypto';
import type { Logger } from '../../src/log';
import { useHarness, type Harness } from './harness';
import { eventually } from './receiver';

// Short timings so that the contract's schedule plays out in milliseconds.
export const FAST_WEBHOOKS = {
  WEBHOOK_RETRY_DELAYS_MS: '50,100,150',
  WEBHOOK_TIMEOUT_MS: '300',
  WORKER_HEARTBEAT_MS: '200',
  WORKER_STALE_MS: '1000',
};

// A harness with the real worker running in this process against its database.
export function useWorkerHarness(env: Record<string, string> = {}, { log }: { log?: Logger } = {}) {
  return { h: useHarness({ ...FAST_WEBHOOKS, ...env }, { worker: true, log }) };
}

// Opens a thread from `from` with `to` in it and posts one message; returns the delivery to `to`.
export async function post(h: Harness, from: { key: string }, to: { username: string }, body: { content: string; summary?: string }) {
  const thread = await h.call('POST', '/api/threads', { key: from.key, body: { title: 'Release plan', participantUsernames: [to.username] } });
  const message = await h.call('POST', `/api/threads/${thread.body.data.id}/messages`, { key: from.key, body });
  const [delivery] = await h.db.sql`
    select d.id from deliveries d join agents a on a.id = d.recipient_id
    where d.message_id = ${message.body.data.id} and a.username = ${to.username}`;
  return { threadId: thread.body.data.id as string, messageId: message.body.data.id as string, deliveryId: delivery!.id as string };
}

export type DeliveryRow = {
  step: string;
  failedStep: string | null;
  error: string | null;
  publishAttempts: number;
  sendAttempts: number;
  notifiedAt: Date | null;
};

export async function deliveryRow(h: Harness, deliveryId: string): Promise<DeliveryRow> {
  const [row] = await h.db.sql<DeliveryRow[]>`
    select step, failed_step as "failedStep", error, publish_attempts as "publishAttempts",
           send_attempts as "sendAttempts", notified_at as "notifiedAt"
    from deliveries where id = ${deliveryId}`;
  return row!;
}

// Waits until the delivery reaches `step` and returns it.
export const untilStep = (h: Harness, deliveryId: string, step: string, timeoutMs?: number) =>
  eventually(async () => {
    const row = await deliveryRow(h, deliveryId);
    return row.step === step ? row : null;
  }, timeoutMs);

export async function attemptRows(h: Harness, deliveryId: string) {
  const rows = await h.db.sql<{ publish: number; attempt: number; resend: number; status: number | null; error: string | null; durationMs: number; interrupted: boolean }[]>`
    select publish, attempt, resend, status, error, duration_ms as "durationMs", interrupted
    from delivery_attempts where delivery_id = ${deliveryId} order by id`;
  return [...rows];
}

// The signature a handler expects, computed here independently of the service's code.
export const sign = (raw: string | Uint8Array, secret: string) => `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;

// Puts a delivery back into an earlier state, as a test's setup: steps only move forward
// (sql/008), so the trigger is bypassed for this one statement.
export const rewind = (h: Harness, deliveryId: string, set: Record<string, unknown>) =>
  h.db.sql.begin(async (tx) => {
    await tx`set local session_replication_role = replica`;
    await tx`update deliveries set ${tx(set)} where id = ${deliveryId}`;
  });
