import { Type as T, type TSchema } from '@sinclair/typebox';
import type { InboxSignal } from '../db/inbox-signal';
import type { Sql } from '../db/connect';
import { asActor, type Agent } from '../domain/agents';
import { acknowledgeMessage } from '../domain/deliveries';
import { waitForInbox, waitSeconds } from '../domain/inbox-wait';
import { listLimit } from '../domain/limit';
import { listMessages, postMessage, readMessage } from '../domain/messages';
import { LIMITS, NewMessage, NewParticipant, NewThread } from '../domain/schemas';
import { addParticipant, getThread, listThreads, openThread, requestClose } from '../domain/threads';
import { validate } from '../domain/validate';
import type { Logger } from '../log';

export type ToolContext = { sql: Sql; log: Logger; inboxSignal: InboxSignal; agent: Agent; abort: AbortSignal };

type Tool = {
  description: string;
  input: TSchema;
  run: (ctx: ToolContext, args: Record<string, unknown>) => Promise<unknown>;
};

const ThreadRef = T.Object({ threadId: T.String({ description: 'Thread id' }) });
const MessageRef = T.Object({ messageId: T.String({ description: 'messageId from check_inbox' }) });
const Limit = T.Integer({ minimum: 1, maximum: LIMITS.listCap, description: `Default ${LIMITS.listDefault}` });

// Only the ids are checked here; the domain validates everything else, so the sentences and their
// order (400 for a bad field before 404 for a stranger's thread) are those of the HTTP API.
const threadId = (args: Record<string, unknown>) => validate(ThreadRef, args, 'arguments').threadId;
const messageId = (args: Record<string, unknown>) => validate(MessageRef, args, 'arguments').messageId;

// Descriptions are short on purpose: every agent pays for them in tokens on every session.
export const tools: Record<string, Tool> = {
  check_inbox: {
    description: `Your unacknowledged messages, oldest first, without bodies. wait: seconds (0-${LIMITS.inboxWaitSeconds}) to hold while the inbox is empty; answers as soon as a message arrives, else [].`,
    input: T.Object({
      limit: T.Optional(Limit),
      wait: T.Optional(T.Number({ minimum: 0, maximum: LIMITS.inboxWaitSeconds, description: 'Seconds, default 0' })),
    }),
    run: (ctx, args) =>
      waitForInbox(ctx.sql, ctx.inboxSignal, ctx.agent, listLimit(args.limit), waitSeconds(args.wait), ctx.abort),
  },
  read_message: {
    description: 'Read one message with its body; records that you read it.',
    input: MessageRef,
    run: (ctx, args) => readMessage(ctx.sql, asActor(ctx.agent), messageId(args)),
  },
  acknowledge: {
    description: 'Remove a message from your inbox once handled. Idempotent.',
    input: MessageRef,
    run: (ctx, args) => acknowledgeMessage(ctx.sql, ctx.agent, messageId(args)),
  },
  send_message: {
    description: 'Post a message to a thread. Refused while a close is pending. Check recipients in the result.',
    input: T.Composite([ThreadRef, NewMessage]),
    run: (ctx, args) => postMessage(ctx.sql, ctx.log, asActor(ctx.agent), threadId(args), args),
  },
  list_threads: {
    description: 'Threads you participate in, newest first.',
    input: T.Object({}),
    run: (ctx) => listThreads(ctx.sql, asActor(ctx.agent)),
  },
  open_thread: {
    description: 'Open a thread; you are added as a participant.',
    input: NewThread,
    run: (ctx, args) => openThread(ctx.sql, asActor(ctx.agent), args),
  },
  get_thread: {
    description: 'One thread with its state and participants.',
    input: ThreadRef,
    run: (ctx, args) => getThread(ctx.sql, asActor(ctx.agent), threadId(args)),
  },
  add_participant: {
    description: 'Add an agent to a thread; it sees the history and receives new messages.',
    input: T.Composite([ThreadRef, NewParticipant]),
    run: (ctx, args) => addParticipant(ctx.sql, asActor(ctx.agent), threadId(args), args),
  },
  request_close: {
    description: 'Ask a person to close a thread you opened. Sending is refused while pending.',
    input: ThreadRef,
    run: (ctx, args) => requestClose(ctx.sql, asActor(ctx.agent), threadId(args)),
  },
  list_messages: {
    description: 'Newest messages of a thread with bodies, oldest first. Marks all returned as read; prefer read_message.',
    input: T.Object({ threadId: ThreadRef.properties.threadId, limit: T.Optional(Limit) }),
    run: (ctx, args) => listMessages(ctx.sql, asActor(ctx.agent), threadId(args), listLimit(args.limit)),
  },
};

// The JSON Schema a client sees: TypeBox's own, without the examples the OpenAPI document shows.
export const toolList = Object.entries(tools).map(([name, tool]) => ({
  name,
  description: tool.description,
  inputSchema: JSON.parse(JSON.stringify(tool.input, (key, value) => (key === 'examples' ? undefined : value))),
}));
