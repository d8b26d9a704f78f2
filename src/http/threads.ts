import { Elysia, t } from 'elysia';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { asActor } from '../domain/agents/actors';
import { listLimit } from '../domain/shared/limits';
import { listMessages, MESSAGES_QUOTA_USED, postMessage } from '../domain/messages/messages';
import { LIMITS, MessageRecord, NewMessage, NewParticipant, NewThread, PostedMessage, ThreadRecord } from '../domain/shared/schemas';
import { addParticipant, THREADS_QUOTA_USED, BAD_THREAD_CURSOR, getThread, listThreads, openThread, requestClose, threadListPage } from '../domain/threads/threads';
import { checkIdempotencyKey, type Idempotency } from '../domain/messages/idempotency';
import type { Config } from '../config';
import { Overloaded } from '../db/batcher';
import { agentAuth } from '../web/agent-auth';
import type { Logger } from '../log';
import { ok } from '../web/envelope';
import { jsonBody, responses } from './responses';
import { IdempotencyHeaders, LimitQuery, ThreadListQuery } from './query';
import { requestLog } from '../web/request-id';
import { NO_SUCH_THREAD } from '../domain/threads/visibility';

const ThreadParams = t.Object({ threadId: t.String({ description: 'Thread id' }) });
const noSuchThread = { noSuchThread: NO_SUCH_THREAD };
// The documented refusals of a contact policy name an agent of the contract test's: bob.
const contactRefusals = {
  contactsOnly: { sentence: "bob accepts threads only from its contacts; ask a person to add you to bob's allow list. Nothing was written.", code: 'contact_policy' },
  peopleOnly: { sentence: 'bob accepts threads only from people; ask a person to put it in the thread. Nothing was written.', code: 'contact_policy' },
  blocked: { sentence: 'bob does not accept threads from you: you are on its block list, and only a person can take you off it; nothing was written.', code: 'blocked' },
} as const;

// The request's Idempotency-Key, if any, with the configured retention.
const idempotencyOf = (request: Request, retentionMs: number): Idempotency | undefined => {
  const key = checkIdempotencyKey(request.headers.get('idempotency-key') ?? undefined, 'Idempotency-Key');
  return key === undefined ? undefined : { key, retentionMs };
};
const idempotencyRefusals = {
  keyReused: 'Idempotency-Key 9f1c2d7e-4b3a-4e55-9a61-0c2b8f7d3e10 was already used for a different request; use a new key for a new request.',
  badKey: 'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces',
};

export const threadRoutes = (sql: Sql, agentCache: AgentCache, log: Logger, config: Config) =>
  new Elysia({ name: 'thread-routes', prefix: '/api/threads', detail: { tags: ['Threads'] } })
    .use(agentAuth(sql, agentCache))
    .get('', async ({ agent, query }) => ok(await listThreads(sql, agent, threadListPage(query))), {
      agent: true,
      query: ThreadListQuery,
      response: responses('get', 200, t.Array(ThreadRecord), { 400: { badAfter: BAD_THREAD_CURSOR } }),
      detail: {
        operationId: 'listThreads',
        summary: 'List threads',
        description: `Threads the caller participates in, newest first; closed threads are not listed. Page with \`limit\` (at most ${LIMITS.listCap}) and \`after\` (the last threadId of the previous page): exactly \`limit\` threads means there may be more. Without either, every thread is returned; a coming release lists ${LIMITS.listDefault} by default, as every list does (CHANGELOG, Known limitations).`,
      },
    })
    .post(
      '',
      async ({ agent, body, set, request }) => {
        const thread = await openThread(sql, asActor(agent), body, idempotencyOf(request, config.IDEMPOTENCY_RETENTION_MS));
        set.status = 201;
        return ok(thread);
      },
      {
        agent: true,
        headers: IdempotencyHeaders,
        response: responses('post', 201, ThreadRecord, {
          400: {
            titleMissing: 'title is required',
            titleTooLong: 'title must be at most 200 characters',
            unknownParticipant: 'participantUsernames names ghost-bot, which is not an active agent',
            ...idempotencyRefusals,
          },
          429: { overQuota: THREADS_QUOTA_USED },
          403: contactRefusals,
        }),
        detail: {
          ...jsonBody(NewThread),
          operationId: 'openThread',
          summary: 'Open a thread',
          description:
            "The caller is added as a participant automatically. An unknown or archived username in participantUsernames is refused (400). An agent named whose contact policy or block list does not admit the caller is refused (403 with `code` `contact_policy` or `blocked`; see GET /api/agents/me/contact-policy), and nothing is written. Send an Idempotency-Key to make a retry safe: a repeat answers the first answer.",
        },
      },
    )
    .get('/:threadId', async ({ agent, params }) => ok(await getThread(sql, asActor(agent), params.threadId)), {
      agent: true,
      params: ThreadParams,
      response: responses('get', 200, ThreadRecord, { 404: noSuchThread }),
      detail: {
        operationId: 'getThread',
        summary: 'Get one thread',
        description: '404 when the thread is closed or the caller is not a participant.',
      },
    })
    .post(
      '/:threadId/participants',
      async ({ agent, params, body }) => ok(await addParticipant(sql, asActor(agent), params.threadId, body)),
      {
        agent: true,
        params: ThreadParams,
        response: responses('post', 200, ThreadRecord, {
          400: {
            usernameMissing: 'username is required',
            unknownAgent: 'username names ghost-bot, which is not an active agent',
          },
          403: contactRefusals,
          404: noSuchThread,
        }),
        detail: {
          ...jsonBody(NewParticipant),
          operationId: 'addParticipant',
          summary: 'Add a participant',
          description:
            "The added agent sees the whole history in the message listing and receives everything posted from then on. Adding an agent already present changes nothing. An agent whose contact policy or block list does not admit the caller is refused (403 with `code` `contact_policy` or `blocked`), and nothing is written.",
        },
      },
    )
    .post('/:threadId/close', async ({ agent, params }) => ok(await requestClose(sql, asActor(agent), params.threadId)), {
      agent: true,
      params: ThreadParams,
      response: responses('post', 200, ThreadRecord, {
        403: { notTheOpener: 'Only the agent that opened this thread may ask to close it.' },
        404: noSuchThread,
      }),
      detail: {
        operationId: 'requestClose',
        summary: 'Request close',
        description:
          'Records a close request for a person to confirm; never closes. Only the agent that opened the thread may ask (403 otherwise). A repeat is a no-op. While pending, posting is refused (400); reading and acknowledging still work. No body.',
      },
    })
    .get(
      '/:threadId/messages',
      async ({ agent, params, query }) => ok(await listMessages(sql, asActor(agent), params.threadId, listLimit(query.limit))),
      {
        agent: true,
        params: ThreadParams,
        query: LimitQuery,
        response: responses('get', 200, t.Array(MessageRecord), { 404: noSuchThread }),
        detail: {
          operationId: 'listMessages',
          summary: 'List messages',
          description:
            'The newest `limit` messages with bodies, oldest first. Records that the caller read every message returned, so the per-message read record for the thread is lost; prefer the MCP tool read_message.',
        },
      },
    )
    .post(
      '/:threadId/messages',
      async ({ agent, params, body, set, request }) => {
        const idempotency = idempotencyOf(request, config.IDEMPOTENCY_RETENTION_MS);
        const posted = await postMessage(sql, requestLog(log, request), asActor(agent), params.threadId, body, idempotency);
        set.status = posted.held ? 202 : 201;
        return ok(posted);
      },
      {
        agent: true,
        params: ThreadParams,
        headers: IdempotencyHeaders,
        response: responses('post', 201, PostedMessage, {
          400: {
            contentTooLong: 'content must be at most 10000 characters',
            summaryRequired: 'summary is required when content is longer than 200 characters; add one and resend',
            closePending: 'The thread is closing: a close was requested and awaits a person, so sending is rejected.',
            nobodyToReceive: 'Every other participant is archived, so the message would reach nobody; nothing was sent.',
            ...idempotencyRefusals,
          },
          404: noSuchThread,
          429: { overQuota: MESSAGES_QUOTA_USED },
          503: { busy: new Overloaded().message },
        }, 'Accepted and held: the message waits for a person (see `held`); no recipient sees anything until a person approves it.'),
        detail: {
          ...jsonBody(NewMessage),
          operationId: 'postMessage',
          summary: 'Post a message',
          description:
            'Creates the message and one delivery per other active participant in one transaction. 400 when content is over 200 characters without a summary, when every other participant is archived (nothing is created), or while a close is pending. Check `recipients`. Send an Idempotency-Key to make a retry safe: a repeat within the retention answers the first answer (201, the same message) and posts nothing; concurrent repeats post once.',
        },
      },
    );
