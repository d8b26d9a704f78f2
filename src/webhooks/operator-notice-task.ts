import type { Task } from 'graphile-worker';
import type { Sql } from '../db/connect';
import { doorbellHeaders } from '../domain/deliveries/doorbell-signature';
import { operatorNoticeBody } from '../domain/people/operator-notice-body';
import { noticeToSend, recordNoticeAttempt } from '../domain/people/operator-notices';
import type { Logger } from '../log';
import type { Metrics } from '../metrics';
import { sendDoorbell, type SendOptions } from './send';

// Sends one attempt of an operator notice (domain/people/operator-notices.ts): written in its
// webhook's format, signed with its secret as doorbells are (Standard Webhooks headers, the notice's
// id as `webhook-id` on every attempt, so a receiver can drop a repeat), sent under the same rules
// (the URL resolved afresh and held to the outbound rules, no redirects, a time limit, the first
// KiB of the answer kept). The attempt is recorded with the webhook's health, and a failed one
// queues the next after its delay in the same statement.
export function operatorNoticeTask(deps: {
  sql: Sql;
  log: Logger;
  metrics?: Metrics;
  send: Omit<SendOptions, 'signal'>;
  retryDelaysMs: number[];
  publicUrl?: string;
}): Task {
  return async (payload, helpers) => {
    const { noticeId, attempt } = payload as { noticeId?: unknown; attempt?: unknown };
    const sent = await noticeToSend(deps.sql, String(noticeId), Number(attempt) || 1);
    if (!sent) return;
    const body = operatorNoticeBody(sent, sent.webhook.format, deps.publicUrl);
    const attemptedAt = new Date();
    const started = performance.now();
    const outcome = await sendDoorbell(
      { url: sent.webhook.url, body, headers: doorbellHeaders({ deliveryId: sent.id, body, secrets: { current: sent.webhook.secret, previous: null, previousUntil: null }, timestamp: attemptedAt }) },
      { ...deps.send, signal: helpers.abortSignal },
    );
    const durationMs = Math.round(performance.now() - started);
    const result = await recordNoticeAttempt(deps.sql, sent, { attemptedAt, durationMs, outcome }, deps.retryDelaysMs);
    deps.metrics?.operatorNotice(sent.notice.event, result);
    deps.log[result === 'delivered' ? 'info' : 'warn']('operator_notice_attempt', {
      noticeId: sent.id,
      event: sent.notice.event,
      webhook: sent.webhook.id,
      attempt: sent.attempt,
      status: outcome.status,
      error: outcome.error,
      outcome: result,
      durationMs,
    });
  };
}
