import { Elysia, t } from 'elysia';
import { DEFAULT_HELD_REQUESTS, type Config } from '../config';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import type { InboxSignal } from '../db/inbox-signal';
import { waitSeconds } from '../domain/deliveries/inbox-wait';
import { messageReceipts, waitForStep } from '../domain/deliveries/receipts';
import { MessageReceipts } from '../domain/shared/schemas';
import { agentAuth } from '../web/agent-auth';
import { tooManyHeld, type HeldRequests } from '../web/held-requests';
import { ok } from '../web/envelope';
import { responses } from './responses';
import { holdOpen } from '../web/hold-open';
import { whileCredentialAnswers } from '../web/held-credential';
import type { Logger } from '../log';
import { ReceiptsQuery } from './query';

const MessageParams = t.Object({ messageId: t.String({ description: 'The id of a message the caller sent' }) });

export const receiptRoutes = (sql: Sql, inboxSignal: InboxSignal, agentCache: AgentCache, held: HeldRequests, log: Logger, config: Config) =>
  new Elysia({ name: 'receipt-routes', prefix: '/api/messages', detail: { tags: ['Messages'] } })
    .use(agentAuth(sql, agentCache))
    .get(
      '/:messageId/deliveries',
      async ({ agent, params, query, request, server }) => {
        const waitFor = waitForStep(query.waitFor);
        const seconds = waitSeconds(query.wait);
        if (waitFor && seconds > 0) holdOpen(server, request, seconds);
        const waits = waitFor !== null && seconds > 0;
        const receipts = await held.whileWaiting(agent.id, waits, () =>
          whileCredentialAnswers({ sql, inboxSignal, log }, agent, request, waits, (abort) =>
            messageReceipts(sql, inboxSignal, agent, params.messageId, { waitFor, seconds, stalledAfterMs: config.STALLED_AFTER_MS, abort }),
          ),
        );
        return ok(receipts);
      },
      {
        agent: true,
        params: MessageParams,
        query: ReceiptsQuery,
        response: responses('get', 200, MessageReceipts, {
          400: { badWaitFor: 'waitFor must be delivered or fetched', badWait: 'wait must be a number of seconds from 0 to 60' },
          404: { noSuchMessage: 'No such message sent by you.' },
          429: { tooManyHeld: tooManyHeld(DEFAULT_HELD_REQUESTS) },
        }),
        detail: {
          operationId: 'getMessageDeliveries',
          summary: 'Delivery receipts',
          description:
            "For a message the caller sent: each recipient's step (accepted, notified, delivered, fetched, failed with the step it had reached), whether it is retrying or stalled, and when it reached each step. Only the sender sees them: 404 for anyone else. With `waitFor` and `wait`, the request is held until every recipient has reached that step or failed, or the wait ends; `reached` says which.",
        },
      },
    );
