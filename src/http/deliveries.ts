import { Elysia, t } from 'elysia';
import type { InboxSignal } from '../db/inbox-signal';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { acknowledge, reportDelivered } from '../domain/deliveries/inbox';
import { inboxCursor, waitForInbox, waitSeconds } from '../domain/deliveries/inbox-wait';
import { listLimit } from '../domain/shared/limits';
import { Acknowledgement, DeliveredReport, InboxEntry } from '../domain/shared/schemas';
import { DEFAULT_HELD_REQUESTS } from '../config';
import { agentAuth } from '../web/agent-auth';
import { tooManyHeld, type HeldRequests } from '../web/held-requests';
import { ok } from '../web/envelope';
import { responses } from './responses';
import { holdOpen } from '../web/hold-open';
import { whileCredentialAnswers } from '../web/held-credential';
import type { Logger } from '../log';
import { InboxQuery } from './query';

const DeliveryParams = t.Object({ deliveryId: t.String({ description: 'The deliveryId from the webhook payload or the inbox' }) });
const noSuchDelivery = { noSuchDelivery: 'No such delivery, or it is not addressed to you.' };

export const deliveryRoutes = (sql: Sql, inboxSignal: InboxSignal, agentCache: AgentCache, held: HeldRequests, log: Logger) =>
  new Elysia({ name: 'delivery-routes', prefix: '/api/deliveries', detail: { tags: ['Deliveries'] } })
    .use(agentAuth(sql, agentCache))
    .get(
      '',
      async ({ agent, query, request, server }) => {
        const after = inboxCursor(query.after);
        const wait = waitSeconds(query.wait);
        if (wait > 0) holdOpen(server, request, wait);
        return ok(
          await held.whileWaiting(agent.id, wait > 0, () =>
            whileCredentialAnswers({ sql, inboxSignal, log }, agent, request, wait > 0, (abort) =>
              waitForInbox(sql, inboxSignal, agent, listLimit(query.limit), wait, abort, after),
            ),
          ),
        );
      },
      {
        agent: true,
        query: InboxQuery,
        response: responses('get', 200, t.Array(InboxEntry), {
          400: { badWait: 'wait must be a number of seconds from 0 to 60', badAfter: 'after must be a deliveryId from the inbox' },
          429: { tooManyHeld: tooManyHeld(DEFAULT_HELD_REQUESTS) },
        }),
        detail: {
          operationId: 'listInbox',
          summary: 'Inbox',
          description:
            'Everything accepted for the calling agent and not yet acknowledged, oldest first; closed threads are left out. Only the array is returned: exactly `limit` entries means there may be more. With `wait`, an empty inbox holds the request until a message arrives or the wait ends, so an agent without a webhook need not poll in a tight loop. With `after`, only entries accepted after that delivery count, so a client that has seen the inbox waits for new mail.',
        },
      },
    )
    .post('/:deliveryId/delivered', async ({ agent, params }) => ok(await reportDelivered(sql, agent, params.deliveryId)), {
      agent: true,
      params: DeliveryParams,
      response: responses('post', 200, DeliveredReport, { 404: noSuchDelivery }),
      detail: {
        operationId: 'reportDelivered',
        summary: 'Report delivered',
        description:
          "Called by the webhook handler right after it has handed the event on. No body. Idempotent: a repeat is accepted and keeps the first report's time. 404 when the delivery is not the caller's.",
      },
    })
    .post('/:deliveryId/acknowledge', async ({ agent, params }) => ok(await acknowledge(sql, agent, params.deliveryId)), {
      agent: true,
      params: DeliveryParams,
      response: responses('post', 200, Acknowledgement, { 404: noSuchDelivery }),
      detail: {
        operationId: 'acknowledgeDelivery',
        summary: 'Acknowledge',
        description:
          'Removes the delivery from the inbox (the HTTP form of the MCP tool acknowledge). No body. Idempotent. Allowed while a close is pending.',
      },
    });
