import { Type as T, type TSchema } from '@sinclair/typebox';
import type { InboxSignal } from '../db/inbox-signal';
import type { Sql } from '../db/connect';
import { asActor, type Agent } from '../domain/agents/actors';
import { ownContactPolicy } from '../domain/agents/contact-policy';
import { directoryQuery, findAgents } from '../domain/agents/directory';
import { acknowledgeMessage } from '../domain/deliveries/inbox';
import { checkIdempotencyKey } from '../domain/messages/idempotency';
import { messageReceipts, waitForStep } from '../domain/deliveries/receipts';
import { waitForInbox, waitSeconds } from '../domain/deliveries/inbox-wait';
import { listLimit } from '../domain/shared/limits';
import { listMessagesWithin, postMessage, readMessage } from '../domain/messages/messages';
import { messageSearch, searchMessages } from '../domain/messages/message-search';
import {
  Acknowledgement,
  ContactPolicyRecord,
  DirectoryPage,
  InboxEntry,
  LIMITS,
  MessageReceipts,
  MessageRecord,
  MessageSearchResults,
  NewMessage,
  NewParticipant,
  NewThread,
  PostedMessage,
  ThreadRecord,
  type FileRecord,
} from '../domain/shared/schemas';
import { addParticipant, getThread, listThreads, openThread, requestClose, threadListPage } from '../domain/threads/threads';
import { validate } from '../domain/shared/validate';
import type { Logger } from '../log';
import type { SearchGate } from '../domain/shared/search-gate';
import type { HeldRequests } from '../web/held-requests';
import type { ResourceLink } from '@modelcontextprotocol/sdk/types.js';

export type ToolContext = {
  sql: Sql;
  searches: SearchGate;
  held: HeldRequests;
  log: Logger;
  inboxSignal: InboxSignal;
  agent: Agent;
  abort: AbortSignal;
  idempotencyRetentionMs: number;
  stalledAfterMs: number;
  // Where clients reach the service's HTTP API (PUBLIC_URL, or the request's own origin).
  baseUrl: string;
};

// What a host may assume of a tool (MCP's tool annotations), stated for each one below.
type Hints = { readOnlyHint: boolean; idempotentHint: boolean; destructiveHint: boolean; openWorldHint: boolean };
const reads: Hints = { readOnlyHint: true, idempotentHint: true, destructiveHint: false, openWorldHint: false };
// Records something (a read, an acknowledgement, a participant, a close request); a repeat
// changes nothing more, and nothing is removed that the agent could want back.
const records: Hints = { readOnlyHint: false, idempotentHint: true, destructiveHint: false, openWorldHint: false };

type Tool = {
  title: string;
  description: string;
  input: TSchema;
  // MCP's structured results are objects: a list is returned under a name.
  output: TSchema;
  hints: Hints;
  run: (ctx: ToolContext, args: Record<string, unknown>) => Promise<Record<string, unknown>>;
  // Resources the result names, linked beside its text (a message's files).
  links?: (result: Record<string, unknown>) => ResourceLink[];
};

// A file a message carries, as the resource resources/read serves (resources.ts).
export const FILE_URI = 'ams://files/';
const fileLink = (file: FileRecord): ResourceLink => ({
  type: 'resource_link',
  uri: `${FILE_URI}${file.id}`,
  name: file.name,
  mimeType: file.contentType,
  size: file.size,
  description: `${file.size} bytes, SHA-256 ${file.sha256}`,
});

const ThreadRef = T.Object({ threadId: T.String({ description: 'Thread id' }) });
const MessageRef = T.Object({ messageId: T.String({ description: 'messageId from check_inbox' }) });
const Limit = T.Integer({ minimum: 1, maximum: LIMITS.listCap, description: `Default ${LIMITS.listDefault}` });

// Only the ids are checked here; the domain validates everything else, so the sentences and their
// order (400 for a bad field before 404 for a stranger's thread) are those of the HTTP API.
const threadId = (args: Record<string, unknown>) => validate(ThreadRef, args, 'arguments').threadId;
const messageId = (args: Record<string, unknown>) => validate(MessageRef, args, 'arguments').messageId;

const IdempotencyKey = T.Object({
  idempotencyKey: T.Optional(
    T.String({
      minLength: 1,
      maxLength: 255,
      pattern: '^[\\x21-\\x7e]+$',
      description: 'Makes a retry safe: a repeat with the same key returns the first result and creates nothing.',
    }),
  ),
});
const idempotencyOf = (ctx: ToolContext, args: Record<string, unknown>) => {
  const key = checkIdempotencyKey(args.idempotencyKey, 'idempotencyKey');
  return key === undefined ? undefined : { key, retentionMs: ctx.idempotencyRetentionMs };
};

const MessageList = T.Object({
  messages: T.Array(MessageRecord, { description: 'Oldest first' }),
  omittedMessageIds: T.Array(T.String(), {
    description: 'Older messages of the requested page left out to keep the result small, newest first; read each with read_message.',
  }),
  note: T.Optional(T.String({ description: 'Present when messages were left out: what to do about it.' })),
});

// Descriptions are short on purpose: every agent pays for them in tokens on every session.
export const tools: Record<string, Tool> = {
  check_inbox: {
    title: 'Check inbox',
    description: `Your unacknowledged messages, oldest first, without bodies. wait: seconds (0-${LIMITS.toolInboxWaitSeconds}) to hold while the inbox is empty; answers as soon as a message arrives, else no entries.`,
    input: T.Object({
      limit: T.Optional(Limit),
      wait: T.Optional(T.Number({ minimum: 0, maximum: LIMITS.toolInboxWaitSeconds, description: 'Seconds, default 0' })),
    }),
    output: T.Object({ entries: T.Array(InboxEntry) }),
    hints: reads,
    run: async (ctx, args) => {
      const wait = waitSeconds(args.wait, LIMITS.toolInboxWaitSeconds);
      return {
        entries: await ctx.held.whileWaiting(ctx.agent.id, wait > 0, () =>
          waitForInbox(ctx.sql, ctx.inboxSignal, ctx.agent, listLimit(args.limit), wait, ctx.abort),
        ),
      };
    },
  },
  read_message: {
    title: 'Read a message',
    description: 'Read one message with its body; records that you read it. Its files are resource links: read each with resources/read.',
    input: MessageRef,
    output: MessageRecord,
    hints: records,
    run: (ctx, args) => readMessage(ctx.sql, asActor(ctx.agent), messageId(args)),
    links: (message) => (message as MessageRecord).files.map(fileLink),
  },
  acknowledge: {
    title: 'Acknowledge a message',
    description: 'Remove a message from your inbox once handled. Idempotent.',
    input: MessageRef,
    output: Acknowledgement,
    hints: records,
    run: (ctx, args) => acknowledgeMessage(ctx.sql, ctx.agent, messageId(args)),
  },
  send_message: {
    title: 'Send a message',
    description: 'Post a message to a thread. Refused while a close is pending. Check recipients in the result. Pass idempotencyKey to retry safely. files: ids of uploaded files (POST /api/files) to attach.',
    input: T.Composite([ThreadRef, NewMessage, IdempotencyKey]),
    output: PostedMessage,
    // Every call posts anew, and the message reaches other agents and their webhooks.
    hints: { readOnlyHint: false, idempotentHint: false, destructiveHint: false, openWorldHint: true },
    run: (ctx, args) => postMessage(ctx.sql, ctx.log, asActor(ctx.agent), threadId(args), args, idempotencyOf(ctx, args)),
  },
  list_threads: {
    title: 'List threads',
    description: 'Threads you participate in, newest first. Page with limit and after (the last threadId of the previous page); without them, every thread.',
    input: T.Object({
      limit: T.Optional(T.Integer({ minimum: 1, maximum: LIMITS.listCap, description: `At most ${LIMITS.listCap}` })),
      after: T.Optional(T.String({ description: 'The last threadId of the previous page' })),
    }),
    output: T.Object({ threads: T.Array(ThreadRecord) }),
    hints: reads,
    run: async (ctx, args) => ({ threads: await listThreads(ctx.sql, ctx.agent, threadListPage(args)) }),
  },
  open_thread: {
    title: 'Open a thread',
    description: "Open a thread; you are added as a participant. An agent whose contact policy does not admit you is refused (_meta.code).",
    input: T.Composite([NewThread, IdempotencyKey]),
    output: ThreadRecord,
    hints: { readOnlyHint: false, idempotentHint: false, destructiveHint: false, openWorldHint: false },
    run: (ctx, args) => openThread(ctx.sql, asActor(ctx.agent), args, idempotencyOf(ctx, args)),
  },
  get_thread: {
    title: 'Get a thread',
    description: 'One thread with its state and participants.',
    input: ThreadRef,
    output: ThreadRecord,
    hints: reads,
    run: (ctx, args) => getThread(ctx.sql, asActor(ctx.agent), threadId(args)),
  },
  add_participant: {
    title: 'Add a participant',
    description: "Add an agent to a thread; it sees the history and receives new messages. Refused when its contact policy does not admit you (_meta.code).",
    input: T.Composite([ThreadRef, NewParticipant]),
    output: ThreadRecord,
    hints: records,
    run: (ctx, args) => addParticipant(ctx.sql, asActor(ctx.agent), threadId(args), args),
  },
  request_close: {
    title: 'Request close',
    description: 'Ask a person to close a thread you opened. Sending is refused while pending.',
    input: ThreadRef,
    output: ThreadRecord,
    hints: records,
    run: (ctx, args) => requestClose(ctx.sql, asActor(ctx.agent), threadId(args)),
  },
  get_contact_policy: {
    title: 'Your contact policy',
    description:
      'Who may put you in a thread, as people set it: open (any agent), contacts (your allow list, or agents sharing a thread with you) or closed (only people). Your block list wins.',
    input: T.Object({}),
    output: ContactPolicyRecord,
    hints: reads,
    run: (ctx) => ownContactPolicy(ctx.sql, ctx.agent),
  },
  find_agents: {
    title: 'Find agents',
    description:
      'Agents you may put in a thread, with profile (name, description, tags) and presence (online now, last seen). q: words to find; tag: one exact tag; pass next as after for more.',
    input: T.Object({
      q: T.Optional(T.String({ maxLength: 200, description: 'e.g. sql review' })),
      tag: T.Optional(T.String({ maxLength: 200, description: 'e.g. sql' })),
      limit: T.Optional(Limit),
      after: T.Optional(T.String({ description: 'next from the previous result' })),
    }),
    output: DirectoryPage,
    hints: reads,
    run: (ctx, args) => findAgents(ctx.searches, ctx.agent, directoryQuery(args), ctx.abort),
  },
  message_status: {
    title: 'Message status',
    description: `For a message you sent: each recipient's step (accepted, notified, delivered, fetched, failed). waitFor + wait (0-${LIMITS.toolInboxWaitSeconds} s) holds until all reach it.`,
    input: T.Object({
      messageId: T.String({ description: 'The id send_message returned' }),
      waitFor: T.Optional(T.Union([T.Literal('delivered'), T.Literal('fetched')])),
      wait: T.Optional(T.Number({ minimum: 0, maximum: LIMITS.toolInboxWaitSeconds, description: 'Seconds, default 0' })),
    }),
    output: MessageReceipts,
    hints: reads,
    run: (ctx, args) => {
      const waitFor = waitForStep(args.waitFor);
      const seconds = waitSeconds(args.wait, LIMITS.toolInboxWaitSeconds);
      return ctx.held.whileWaiting(ctx.agent.id, waitFor !== null && seconds > 0, () =>
        messageReceipts(ctx.sql, ctx.inboxSignal, ctx.agent, messageId(args), { waitFor, seconds, stalledAfterMs: ctx.stalledAfterMs, abort: ctx.abort }),
      );
    },
  },
  search_messages: {
    title: 'Search messages',
    description: 'Find messages in your threads by words: "a phrase", -excluded, or. Best match first, with excerpts; pass next as after for more. Does not mark anything read.',
    input: T.Object({
      q: T.String({ minLength: 1, maxLength: 200, description: 'e.g. invoice format -draft' }),
      threadId: T.Optional(T.String({ description: 'Search one thread only' })),
      limit: T.Optional(Limit),
      after: T.Optional(T.String({ description: 'next from the previous result' })),
    }),
    output: MessageSearchResults,
    hints: reads,
    run: (ctx, args) => searchMessages(ctx.searches, asActor(ctx.agent), messageSearch(args), ctx.abort),
  },
  list_messages: {
    title: 'List messages',
    description: `Newest messages of a thread with bodies, oldest first, at most ${LIMITS.toolResultCharacters} characters; older ones past that are listed by id. Marks those returned as read; prefer read_message.`,
    input: T.Object({ threadId: ThreadRef.properties.threadId, limit: T.Optional(Limit) }),
    output: MessageList,
    hints: records,
    run: async (ctx, args) => {
      const page = await listMessagesWithin(ctx.sql, asActor(ctx.agent), threadId(args), listLimit(args.limit), LIMITS.toolResultCharacters);
      if (page.omittedMessageIds.length === 0) return page;
      const note = `${page.omittedMessageIds.length} older messages were left out to keep this result under ${LIMITS.toolResultCharacters} characters; they are not marked read. Read each with read_message, or ask for a smaller limit.`;
      return { ...page, note };
    },
  },
};

// The JSON Schema a client sees: TypeBox's own, without the examples the OpenAPI document shows.
const jsonSchema = (schema: TSchema) => JSON.parse(JSON.stringify(schema, (key, value) => (key === 'examples' ? undefined : value)));

export const toolList = Object.entries(tools).map(([name, tool]) => ({
  name,
  title: tool.title,
  description: tool.description,
  inputSchema: jsonSchema(tool.input),
  outputSchema: jsonSchema(tool.output),
  annotations: { title: tool.title, ...tool.hints },
}));
