import type { Task } from 'graphile-worker';
import type { Sql } from '../db/connect';
import { recordTestEvent, testEventBody, testEventToSend } from '../domain/agents/test-events';
import { doorbellHeaders } from '../domain/deliveries/doorbell-signature';
import type { Logger } from '../log';
import type { Metrics } from '../metrics';
import { sendDoorbell, type SendOptions } from './send';

// Sends a test event a person asked for (domain/agents/test-events.ts): once, signed as doorbells
// are, its outcome recorded with its endpoint's health. The endpoint's doorbell slots are not
// taken: one test event per agent may be on its way, and a person testing a hanging handler wants
// to see it hang, not wait behind its doorbells.
export function testEventTask(deps: { sql: Sql; log: Logger; metrics?: Metrics; send: Omit<SendOptions, 'signal'> }): Task {
  return async (payload, helpers) => {
    const event = await testEventToSend(deps.sql, String((payload as { testEventId?: unknown }).testEventId));
    if (!event) return;
    const body = testEventBody(event);
    const attemptedAt = new Date();
    const started = performance.now();
    const outcome = await sendDoorbell(
      { url: event.endpoint.url, body, headers: doorbellHeaders({ deliveryId: event.id, body, secrets: event.secrets, timestamp: attemptedAt }) },
      { ...deps.send, signal: helpers.abortSignal },
    );
    const durationMs = Math.round(performance.now() - started);
    deps.log.info('test_event_attempt', { testEventId: event.id, agent: event.username, status: outcome.status, error: outcome.error, durationMs });
    await recordTestEvent(deps.sql, event, { attemptedAt, durationMs, outcome });
  };
}
