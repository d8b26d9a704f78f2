import {
  TaskState,
  type AgentCard,
  type CancelTaskRequest,
  type DeleteTaskPushNotificationConfigRequest,
  type GetExtendedAgentCardRequest,
  type GetTaskPushNotificationConfigRequest,
  type ListTaskPushNotificationConfigsRequest,
  type GetTaskRequest,
  type ListTasksRequest,
  type ListTasksResponse,
  type Message,
  type SendMessageRequest,
  type StreamResponse,
  type SubscribeToTaskRequest,
  type Task,
  type TaskPushNotificationConfig,
} from '@a2a-js/sdk';
import {
  A2AError,
  ContentTypeNotSupportedError,
  ExtendedAgentCardNotConfiguredError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';
import type { A2ARequestHandler } from '@a2a-js/sdk/server';
import type { Sql } from '../db/connect';
import type { InboxSignal } from '../db/inbox-signal';
import type { Agent } from '../domain/agents/actors';
import { followSentDelivery, sentDeliveries, sentDelivery } from '../domain/deliveries/sent-deliveries';
import { checkPushConfig, noSuchConfig, pushConfigs, removePushConfig, savePushConfig, type NewPushConfig, type PushConfig } from '../domain/deliveries/push-configs';
import type { WebhookUrlPolicy } from '../domain/agents/webhook-url';
import { checkIdempotencyKey } from '../domain/messages/idempotency';
import { postToAgent } from '../domain/messages/messages';
import { smallFilesBytes, uploadFile } from '../domain/files/files';
import { LIMITS } from '../domain/shared/limits';
import { DomainError } from '../domain/shared/errors';
import type { Logger } from '../log';
import { failureOf } from '../web/failure';
import { heldTask, smallFilesOf, stateFilter, statusUpdate, taskState, toTask, withFileBytes } from './tasks';
import { approvedDelivery, holdOf } from '../domain/messages/holds';

export type A2AContext = {
  sql: Sql;
  inboxSignal: InboxSignal;
  log: Logger;
  // Ends a stream: the client left, or its credential stopped answering (routes.ts).
  abort: AbortSignal;
  // Called when what the caller's key answers for may have changed, while a stream is open.
  credentialChanged: () => void;
  // Takes one of the caller's places for a stream or a blocking send (web/held-requests.ts), or
  // refuses when it holds all of them; answers how to give it back.
  holdRequest: () => () => void;
  requestId: string;
  caller: Agent;
  // The agent whose address was called: every task here is the delivery of a message to it.
  recipient: Agent;
  card: AgentCard;
  stalledAfterMs: number;
  idempotencyRetentionMs: number;
  // How long a blocking send is held for its task to end (A2A_SEND_WAIT_MS).
  sendWaitMs: number;
  // What push-notification URLs may be (the webhook rules).
  webhookPolicy: WebhookUrlPolicy;
  // Where clients reach the service's HTTP API: files are named by their address there.
  baseUrl: string;
};

// A page of tasks holds at most this many (A2A's own bound on pageSize).
const PAGE_CAP = 100;
const PAGE_DEFAULT = 50;

// A2A's operations on one of our agents, for one caller, answered by the domain. The SDK's own
// request handler is not used: it keeps tasks as objects that an agent's code moves on in this
// process, where here a task is a delivery whose state PostgreSQL holds and any process changes.
export function a2aRequestHandler(ctx: A2AContext): A2ARequestHandler {
  const { sql, caller, recipient } = ctx;
  // An answer about one task hands its small files over as bytes, read in one statement for the
  // files the caller sees; at most 2 × FILES_PER_MESSAGE × LIMITS.answerFileBytes. Lists of tasks
  // (and pushes, push-body.ts) name every file by address only.
  const withSmallFiles = async (task: Task): Promise<Task> => {
    const small = smallFilesOf(task, LIMITS.answerFileBytes);
    return small.length === 0 ? task : withFileBytes(task, await smallFilesBytes(sql, caller, small, LIMITS.answerFileBytes));
  };
  const taskOf = async (id: string, read: { historyLength?: number; readAnswer: boolean }): Promise<Task> => {
    if (!id.trim()) throw new RequestMalformedError('id is required: the task to read.');
    // A task named by a message the caller sent that was held for a person: its delivery's once
    // approved, else what became of the hold.
    const hold = await holdOf(sql, caller.id, id);
    if (hold) {
      const deliveryId = hold.state === 'approved' ? await approvedDelivery(sql, id, recipient.id) : null;
      if (deliveryId === null) return heldTask({ ...hold, messageId: id }, recipient.username);
      id = deliveryId;
    }
    const sent = await sentDelivery(sql, caller, recipient, id, { stalledAfterMs: ctx.stalledAfterMs, readAnswer: read.readAnswer }).catch(
      notFoundAs(id),
    );
    return withSmallFiles(toTask(sent, read.historyLength, ctx.baseUrl));
  };

  // Sends the message; answers its task as it is once sent, or, `held`, once it ends or the wait does.
  const send = async (params: SendMessageRequest, held: boolean): Promise<Task> => {
    const message = params.message;
    if (!message) throw new RequestMalformedError('message is required.');
    if (message.taskId) {
      throw new UnsupportedOperationError(
        'Each message is a task of its own here, complete once it is answered: to follow up, send a new message with the same contextId and no taskId.',
      );
    }
    const key = checkIdempotencyKey(message.messageId || undefined, 'messageId');
    if (!key) throw new RequestMalformedError('messageId is required: a message sent again with the same messageId creates nothing.');
    const push = params.configuration?.taskPushNotificationConfig;
    const checkedPush = push ? await checkPushConfig(pushInput(push), ctx.webhookPolicy) : null;
    // A blocking send holds one of the caller's places while it waits (web/held-requests.ts), taken
    // before anything is sent: a refusal sends nothing.
    const release = held ? ctx.holdRequest() : () => {};
    try {
      const { content, files } = await contentOf(ctx, message);
      const posted = await postToAgent(
        sql,
        ctx.log,
        caller,
        recipient,
        message.contextId || null,
        { content, ...(files.length > 0 && { files }), ...summaryOf(message) },
        { key, retentionMs: ctx.idempotencyRetentionMs, name: 'messageId' },
      );
      const historyLength = params.configuration?.historyLength;
      // Held for a person: nothing to push or wait for until a person decides.
      if (posted.deliveryId === null) return await taskOf(posted.id, { historyLength, readAnswer: true });
      if (checkedPush) await savePushConfig(sql, caller, recipient, posted.deliveryId, checkedPush);
      return held ? await ended(posted.deliveryId, historyLength) : await taskOf(posted.deliveryId, { historyLength, readAnswer: true });
    } finally {
      release();
    }
  };

  // A blocking send (A2A's default: returnImmediately false) waits for its task to reach a state
  // A2A calls terminal. A mailbox's answer may take days, so it is held for `sendWaitMs` at most, as
  // the inbox wait is, woken as a stream is; then, or when the client leaves, the task is answered
  // as it stands.
  const ended = async (deliveryId: string, historyLength: number | undefined): Promise<Task> => {
    const changes = followSentDelivery(sql, ctx.inboxSignal, caller, recipient, deliveryId, {
      stalledAfterMs: ctx.stalledAfterMs,
      abort: AbortSignal.any([ctx.abort, AbortSignal.timeout(ctx.sendWaitMs)]),
      changed: ctx.credentialChanged,
    });
    for await (const sent of changes) {
      if (ENDS_A_WAIT.has(taskState(sent))) return withSmallFiles(toTask(sent, historyLength, ctx.baseUrl));
    }
    return taskOf(deliveryId, { historyLength, readAnswer: true });
  };
  const configOf = async (taskId: string, name: string) => {
    const config = (await pushConfigs(sql, caller, recipient, taskId).catch(notFoundAs(taskId))).find((c) => c.name === name);
    if (!config) throw noSuchConfig(name, taskId);
    return config;
  };

  // The task as it was just answered, then an update each time it moves, until it is final.
  async function* follow(task: Task): AsyncGenerator<StreamResponse, void, undefined> {
    yield { payload: { $case: 'task', value: task } };
    if (isFinal(task)) return;
    let last = JSON.stringify(task.status);
    const changes = followSentDelivery(sql, ctx.inboxSignal, caller, recipient, task.id, {
      stalledAfterMs: ctx.stalledAfterMs,
      abort: ctx.abort,
      changed: ctx.credentialChanged,
    });
    for await (const sent of changes) {
      const next = toTask(sent, 0, ctx.baseUrl);
      const seen = JSON.stringify(next.status);
      if (seen === last) continue;
      last = seen;
      yield { payload: { $case: 'statusUpdate', value: statusUpdate(await withSmallFiles(next)) } };
      if (isFinal(next)) return;
    }
  }

  return {
    getAgentCard: async () => ctx.card,
    getAuthenticatedExtendedAgentCard: async (_params: GetExtendedAgentCardRequest) => {
      throw new ExtendedAgentCardNotConfiguredError('This agent has no extended card: its card says all there is.');
    },

    sendMessage: (params: SendMessageRequest) =>
      answered(ctx, () => send(params, !params.configuration?.returnImmediately && ctx.sendWaitMs > 0)),
    sendMessageStream: (params: SendMessageRequest) => streamed(ctx, async function* () {
      yield* follow(await send(params, false));
    }),
    resubscribe: (params: SubscribeToTaskRequest) => streamed(ctx, async function* () {
      yield* follow(await taskOf(params.id, { readAnswer: true }));
    }),

    getTask: (params: GetTaskRequest) => answered(ctx, () => taskOf(params.id, { historyLength: params.historyLength, readAnswer: true })),

    listTasks: (params: ListTasksRequest) =>
      answered(ctx, async (): Promise<ListTasksResponse> => {
        if (params.statusTimestampAfter) {
          throw new UnsupportedOperationError('statusTimestampAfter is not supported: page through the list, newest first, instead.');
        }
        const asked = Number.isFinite(params.pageSize) ? Math.trunc(params.pageSize!) : 0;
        const pageSize = asked >= 1 ? Math.min(asked, PAGE_CAP) : PAGE_DEFAULT;
        const page = await sentDeliveries(
          sql,
          caller,
          recipient,
          { threadId: params.contextId || null, ...stateFilter(params.status) },
          { after: params.pageToken || null, since: null, limit: pageSize },
          ctx.stalledAfterMs,
        ).catch((error: unknown) => {
          if (error instanceof DomainError && error.kind === 'invalid') throw new RequestMalformedError('pageToken must be the nextPageToken of the previous page.');
          throw error;
        });
        return {
          tasks: page.items.map((sent) => toTask(sent, params.historyLength ?? 0, ctx.baseUrl)),
          nextPageToken: page.next ?? '',
          pageSize,
          totalSize: page.total,
        };
      }),

    cancelTask: (params: CancelTaskRequest) =>
      answered(ctx, async (): Promise<Task> => {
        await taskOf(params.id, { historyLength: 0, readAnswer: false });
        throw new TaskNotCancelableError(
          `A message accepted into ${recipient.username}'s mailbox stays there: it cannot be withdrawn. Send a follow-up with the same contextId instead.`,
        );
      }),

    createTaskPushNotificationConfig: (params: TaskPushNotificationConfig) =>
      answered(ctx, async () => {
        if (!params.taskId) throw new RequestMalformedError('taskId is required: the task to be told about.');
        const checked = await checkPushConfig(pushInput(params), ctx.webhookPolicy);
        const saved = await savePushConfig(sql, caller, recipient, params.taskId, checked).catch(notFoundAs(params.taskId));
        return a2aConfig(saved);
      }),
    getTaskPushNotificationConfig: (params: GetTaskPushNotificationConfigRequest) =>
      answered(ctx, async () => a2aConfig(await configOf(params.taskId, params.id))),
    listTaskPushNotificationConfigs: (params: ListTaskPushNotificationConfigsRequest) =>
      answered(ctx, async () => ({
        configs: (await pushConfigs(sql, caller, recipient, params.taskId).catch(notFoundAs(params.taskId))).map(a2aConfig),
        nextPageToken: '',
      })),
    deleteTaskPushNotificationConfig: (params: DeleteTaskPushNotificationConfigRequest) =>
      answered(ctx, async () => {
        await configOf(params.taskId, params.id);
        await removePushConfig(sql, caller, recipient, params.taskId, params.id);
      }),
  };
}

const noSuchTask = (id: string) => new TaskNotFoundError(`No task ${id} of yours with this agent.`);

const notFoundAs = (id: string) => (error: unknown) => {
  if (error instanceof DomainError && error.kind === 'not_found') throw noSuchTask(id);
  throw error;
};

const pushInput = (config: TaskPushNotificationConfig): NewPushConfig => ({
  name: config.id || undefined,
  url: config.url,
  token: config.token || undefined,
  authScheme: config.authentication?.scheme || undefined,
  authCredentials: config.authentication?.credentials || undefined,
});

const a2aConfig = (config: PushConfig): TaskPushNotificationConfig => ({
  tenant: '',
  id: config.name,
  taskId: config.deliveryId,
  url: config.url,
  token: config.token,
  authentication: config.authScheme ? { scheme: config.authScheme, credentials: config.authCredentials } : undefined,
});

// A stream ends after the update that completes its task. Not at `failed`: here a failed doorbell
// leaves the message in the recipient's inbox, where it may still be read and answered.
const isFinal = (task: Task) => task.status?.state === TaskState.TASK_STATE_COMPLETED;

// The states A2A calls terminal that a task here reaches (it is never canceled or rejected, nor
// interrupted for input or authentication). A blocking send answers at the first of them, failed
// included: A2A asks it to, though the message may still be read from the inbox.
const ENDS_A_WAIT = new Set([TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED]);

// A message's text parts are its content, one after another; its file parts are files it carries:
// one by `url` names a file uploaded here (its download address, or ams://files/<id>), one by `raw`
// bytes (at most LIMITS.inlineFileBytes) is uploaded as the caller's, in the order given. A message
// of files alone reads as their names. Structured data cannot be carried. (A part without content
// never gets here: params.ts refuses it.)
async function contentOf(ctx: A2AContext, message: Message): Promise<{ content: string; files: string[] }> {
  const texts: string[] = [];
  const files: { id: string; name: string }[] = [];
  for (const part of message.parts) {
    const content = part.content;
    if (content?.$case === 'text') texts.push(content.value);
    else if (content?.$case === 'url') files.push({ id: fileIdOf(ctx, content.value), name: part.filename || content.value });
    else if (content?.$case === 'raw') {
      if (content.value.byteLength > LIMITS.inlineFileBytes) {
        throw new RequestMalformedError(
          `A raw file part may hold at most ${LIMITS.inlineFileBytes} bytes; upload a larger file with POST ${ctx.baseUrl}/api/files and send its address as a url part.`,
        );
      }
      const body = [new Uint8Array(content.value)];
      const declaredLength = content.value.byteLength;
      const file = await uploadFile(ctx.sql, ctx.caller, { name: part.filename || 'file', contentType: part.mediaType || null, declaredLength, body });
      files.push({ id: file.id, name: file.name });
    } else {
      throw new ContentTypeNotSupportedError(`A ${content?.$case} part cannot be carried: send text, and files as url or raw parts.`);
    }
  }
  return { content: texts.length > 0 ? texts.join('\n\n') : files.map((f) => f.name).join(', '), files: files.map((f) => f.id) };
}

const FILE_ADDRESS = /^\/api\/files\/([^/]+)\/content$/;

// The id of a file named by its address here; any other URL is refused, since this service
// fetches nothing on a caller's word.
function fileIdOf(ctx: A2AContext, url: string): string {
  if (url.startsWith('ams://files/')) return url.slice('ams://files/'.length);
  if (url.startsWith(`${ctx.baseUrl}/`)) {
    const id = FILE_ADDRESS.exec(url.slice(ctx.baseUrl.length))?.[1];
    if (id) return id;
  }
  throw new ContentTypeNotSupportedError(
    `A url part must name a file uploaded here (${ctx.baseUrl}/api/files/<id>/content, or ams://files/<id>); upload it with POST ${ctx.baseUrl}/api/files first, or send its bytes as a raw part.`,
  );
}

// The contract's summary, which a long message needs, travels in the message's metadata.
function summaryOf(message: Message): { summary?: unknown } {
  const summary = message.metadata?.summary;
  return summary === undefined ? {} : { summary };
}

// The domain's refusals as A2A's errors, with the same sentence: not found is A2A's 404, anything
// else the client sent is invalid params. A fault is logged and answered without its details, as
// an A2AError (internal error, with the SDK's error details), which routes.ts tells apart from
// the SDK's own failures to read a request.
async function answered<T>(ctx: A2AContext, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw asA2AError(ctx, error);
  }
}

// The same for a stream: a refusal before its first event (the caller holding every stream it may
// is one, before anything is sent), or a fault while it runs. Its place is given back however it ends.
async function* streamed<T>(ctx: A2AContext, run: () => AsyncGenerator<T, void, undefined>): AsyncGenerator<T, void, undefined> {
  let release: (() => void) | null = null;
  try {
    release = ctx.holdRequest();
    yield* run();
  } catch (error) {
    throw asA2AError(ctx, error);
  } finally {
    release?.();
  }
}

function asA2AError(ctx: A2AContext, error: unknown): A2AError {
  if (error instanceof A2AError) return error;
  const failure = failureOf(error, ctx.requestId);
  if (failure.log && failure.log !== 'fault') ctx.log.warn(failure.log, { door: 'a2a', error: (error as Error).message });
  if (failure.log === 'fault') ctx.log.error('a2a_request_failed', { agent: ctx.caller.username, error: (error as Error).stack ?? String(error) });
  if (error instanceof DomainError && error.kind === 'not_found') return new TaskNotFoundError(failure.sentence);
  // A refusal people configured (a contact policy, a quota): the request is refused as it stands,
  // with the HTTP API's status and code, and the seconds to wait, in the error's metadata.
  if (error instanceof DomainError && error.detail.code) {
    const metadata: Record<string, string> = { status: String(failure.status), code: error.detail.code };
    if (error.detail.retryAfterSeconds !== undefined) metadata.retryAfter = String(error.detail.retryAfterSeconds);
    return new RequestMalformedError({ message: failure.sentence, metadata });
  }
  if (error instanceof DomainError) return new RequestMalformedError(failure.sentence);
  return new A2AError(failure.sentence);
}
