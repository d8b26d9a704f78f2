import { createHash } from 'node:crypto';
import type { Task } from 'graphile-worker';
import type { Sql } from '../db/connect';
import { doorbellHeaders } from '../domain/deliveries/doorbell-signature';
import { claimPush, finishPush, postponePush, type RenderPush } from '../domain/deliveries/push-configs';
import type { EndpointSlots } from './endpoint-slots';
import { answeredOk } from '../domain/deliveries/retry-policy';
import { sentDelivery } from '../domain/deliveries/sent-deliveries';
import type { Logger } from '../log';
import { sendDoorbell, type SendOptions } from './send';

// Sends a push a sender configured for a delivery of its message (domain/deliveries/push-configs.ts):
// the delivery as it is now, in the words of the door whose configuration it is (`render`; the A2A
// door's today), when it differs from the last push delivered to the URL. The answer is named,
// not read: a push is not a read. Sent as doorbells are (the URL resolved afresh and held to the
// webhook rules, no redirects, the time limit), with Standard Webhooks signatures under the
// sender's signing secrets when it has a webhook (both, during a rotation's grace). A failure is
// retried by the job queue, with its growing delays, up to the job's attempts. One push per configuration is sent at a time
// (claimPush); a push due meanwhile waits for it, then sends the task as it is by then. A URL
// takes as many requests at once as the doorbells' caps allow (endpoint-slots.ts); one more waits.
// A push over its URL's cap waits this long, queued again, rather than hold a worker slot.
const OVER_CAP_MS = 1_000;

// A push its receiver did not take: an answer other than 2xx (a redirect included), or none. That
// is the receiver's health, not a fault of ours: it is thrown so that the job queue retries it,
// and logged as a warning without a stack (worker.ts), as a doorbell's failed attempt is not an
// error either.
export class PushNotTaken extends Error {}

export function pushTask(deps: {
  sql: Sql;
  log: Logger;
  stalledAfterMs: number;
  send: Omit<SendOptions, 'signal'>;
  slots: EndpointSlots;
  render: RenderPush;
}): Task {
  // Held a little longer than a push can take, so that a push cut off (the worker died) frees it.
  const leaseMs = deps.send.timeoutMs + 5_000;
  return async (payload, helpers) => {
    const push = await claimPush(deps.sql, String((payload as { configId?: unknown }).configId), leaseMs);
    if (!push || 'busyUntil' in push) return;
    const { config, sender, recipient } = push;
    // The same caps as doorbells, counted with them: a URL that hangs holds its small share of the
    // worker's slots, not all of them.
    const release = deps.slots.take(config.url);
    if (!release) return postponePush(deps.sql, config, OVER_CAP_MS);
    let delivered: string | null = null;
    try {
      const sent = await sentDelivery(deps.sql, sender, recipient, config.deliveryId, { stalledAfterMs: deps.stalledAfterMs, readAnswer: false });
      const message = deps.render(sent, config);
      if (message.status === config.pushed) return;
      // The same push retried keeps its id, as Standard Webhooks asks.
      const pushId = `${config.id}-${createHash('sha256').update(message.status).digest('hex').slice(0, 16)}`;
      const signed = push.secrets ? doorbellHeaders({ deliveryId: pushId, body: message.body, secrets: push.secrets, timestamp: new Date() }) : {};
      const started = performance.now();
      const outcome = await sendDoorbell(
        { url: config.url, body: message.body, headers: { ...signed, ...message.headers } },
        { ...deps.send, signal: helpers.abortSignal },
      );
      deps.log.info('push_attempt', {
        config: config.id,
        deliveryId: sent.id,
        agent: sender.username,
        status: outcome.status,
        error: outcome.error,
        durationMs: Math.round(performance.now() - started),
      });
      if (!answeredOk(outcome.status)) throw new PushNotTaken(`the push was not answered with 2xx: ${outcome.error ?? `HTTP ${outcome.status}`}`);
      delivered = message.status;
    } finally {
      release();
      await finishPush(deps.sql, config, delivered);
    }
  };
}
