import { Elysia, t } from 'elysia';
import type { InboxSignal } from '../db/inbox-signal';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { acknowledge, reportDelivered } from '../domain/deliveries';
import { waitForInbox, waitSeconds } from '../domain/inbox-wait';
import { listLimit } from '../domain/limit';
import { InboxEntry, LIMITS } from '../domain/schemas';
import { agentAuth } from './agent-auth';
import { ok, responses } from './envelope';
import { holdOpen } from './hold-open';

export const LimitQuery = t.Object({
  limit: t.Optional(
    t.String({
      description: `Integer, default ${LIMITS.listDefault}, cap ${LIMITS.listCap}. A missing or unparseable value means the default; a larger one means the cap.`,
      examples: ['50'],
    }),
  ),
});

const InboxQuery = t.Object({
  ...LimitQuery.properties,
  wait: t.Optional(
    t.String({
      description: `Seconds to hold the request while the inbox is empty, from 0 to ${LIMITS.inboxWaitSeconds} (default 0). It answers as soon as a message arrives, or with [] when the wait ends. Any other value is refused (400).`,
      examples: ['30'],
    }),
  ),
});

const DeliveryParams = t.Object({ deliveryId: t.String({ description: 'The deliveryId from the webhook payload or the inbox' }) });

export const deliveryRoutes = (sql: Sql, inboxSignal: InboxSignal, agentCache: AgentCache) =>
  new Elysia({ name: 'delivery-routes', prefix: '/api/deliveries', detail: { tags: ['Deliveries'] } })
    .use(agentAuth(sql, agentCache))
    .get(
      '',
      async ({ agent, query, request, server }) => {
        const wait = waitSeconds(query.wait);
        if (wait > 0) holdOpen(server, request, wait);
        return ok(await waitForInbox(sql, inboxSignal, agent, listLimit(query.limit), wait, request.signal));
      },
      {
        agent: true,
        query: InboxQuery,
        response: responses(200, t.Array(InboxEntry), [400, 401]),
        detail: {
          summary: 'Inbox',
          description:
            'Everything accepted for the calling agent and not yet acknowledged, oldest first; closed threads are left out. Only the array is returned: exactly `limit` entries means there may be more. With `wait`, an empty inbox holds the request until a message arrives or the wait ends, so an agent without a webhook need not poll in a tight loop.',
        },
      },
    )
    .post(
      '/:deliveryId/delivered',
      async ({ agent, params }) => ok(await reportDelivered(sql, agent, params.deliveryId)),
      {
        agent: true,
        params: DeliveryParams,
        response: responses(
          200,
          t.Object({
            message: t.String({ examples: ['Delivery reported as delivered.'] }),
            deliveredAt: t.String({ format: 'date-time', description: 'Time of the first report; repeats keep it' }),
          }),
          [401, 404],
        ),
        detail: {
          summary: 'Report delivered',
          description:
            "Called by the webhook handler right after it has handed the event on. No body. Idempotent: a repeat is accepted and keeps the first report's time. 404 when the delivery is not the caller's.",
        },
      },
    )
    .post('/:deliveryId/acknowledge', async ({ agent, params }) => ok(await acknowledge(sql, agent, params.deliveryId)), {
      agent: true,
      params: DeliveryParams,
      response: responses(200, t.Object({ message: t.String({ examples: ['Delivery acknowledged.'] }) }), [401, 404]),
      detail: {
        summary: 'Acknowledge',
        description:
          'Removes the delivery from the inbox (the HTTP form of the MCP tool acknowledge). No body. Idempotent. Allowed while a close is pending.',
      },
    });
