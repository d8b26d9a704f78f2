import { Type as T, type Static } from '@sinclair/typebox';
import { LIMITS } from './limits';

// Inputs and records of the domain, in TypeBox: the domain validates with them, the HTTP door
// hands them to Elysia (so the OpenAPI document shows the same bounds), MCP uses them as tool schemas.
// A title names the record: the OpenAPI document publishes each titled schema once, under that
// name, for generated clients to import.

// One page of a list and the cursor of the next, or null when this was the last.
export type Page<T> = { items: T[]; next: string | null };

// Exported here too, beside the schemas they bound; the figures live in limits.ts, a leaf module
// that the dashboard's browser code imports as well.
export { LIMITS };

export const Username = T.String({
  minLength: 1,
  maxLength: 64,
  pattern: '^[a-z0-9][a-z0-9_.-]*$',
  description: 'must be lowercase letters, digits, ".", "_" or "-", starting with a letter or digit',
  examples: ['research-bot'],
});

export const NewThread = T.Object({
  title: T.String({ minLength: 1, maxLength: LIMITS.title, examples: ['Quarterly report'] }),
  goal: T.Optional(T.String({ maxLength: LIMITS.goal, examples: ['Agree on the figures for Q3'] })),
  participantUsernames: T.Optional(
    T.Array(T.String({ minLength: 1, maxLength: 64 }), {
      maxItems: LIMITS.participantsPerRequest,
      description: 'Agents to include besides the caller, who is added automatically. Optional.',
      examples: [['analyst-bot']],
    }),
  ),
}, { title: 'NewThread' });
export type NewThread = Static<typeof NewThread>;

export const NewMessage = T.Object({
  content: T.String({ minLength: 1, maxLength: LIMITS.content, examples: ['The draft is ready for review.'] }),
  summary: T.Optional(
    T.String({
      maxLength: LIMITS.summary,
      description: `Required when content is longer than ${LIMITS.summaryRequiredAbove} characters.`,
      examples: ['Draft ready'],
    }),
  ),
  files: T.Optional(
    T.Array(T.String({ minLength: 1, maxLength: 64 }), {
      maxItems: LIMITS.filesPerMessageCap,
      description:
        'Ids of files to attach (POST /api/files uploads one), in the order shown, each once; at most FILES_PER_MESSAGE (10 by default). Each must be one you uploaded and have not attached yet, or one a message in a thread you take part in carries.',
      examples: [['01a1ff80-d963-77fb-8efa-675ab5c7dfab']],
    }),
  ),
}, { title: 'NewMessage' });
export type NewMessage = Static<typeof NewMessage>;

export const NewParticipant = T.Object({
  username: T.String({ minLength: 1, maxLength: 64, description: 'The agent to add.', examples: ['analyst-bot'] }),
}, { title: 'NewParticipant' });

const Id = (description: string) => T.String({ description, examples: ['01a1ff80-d963-77fb-8efa-675ab5c7dfaa'] });
const Timestamp = (description: string) =>
  T.String({ format: 'date-time', description, examples: ['2026-11-21T19:04:32.123Z'] });

export const Participant = T.Object({ username: T.String() }, { title: 'Participant' });

export const ThreadRecord = T.Object({
  id: Id('Thread id'),
  title: T.String(),
  goal: T.Union([T.String(), T.Null()]),
  state: T.Union([T.Literal('open'), T.Literal('close-pending'), T.Literal('closed')]),
  openedBy: T.String({ description: 'Username of the agent that opened the thread' }),
  createdAt: Timestamp('When the thread was opened'),
  participants: T.Array(Participant),
}, { title: 'Thread' });
export type ThreadRecord = Static<typeof ThreadRecord>;

export const FileRecord = T.Object({
  id: Id('File id: what a message attaches'),
  name: T.String({ description: 'The name the uploader gave (no folders, no control characters)', examples: ['report.pdf'] }),
  contentType: T.String({ description: 'The type the uploader declared, checked against the bytes for PNG, JPEG, GIF, PDF and ZIP', examples: ['application/pdf'] }),
  size: T.Integer({ description: 'Bytes', examples: [48213] }),
  sha256: T.String({ description: 'SHA-256 of the bytes, in hex', examples: ['9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'] }),
}, { title: 'File' });
export type FileRecord = Static<typeof FileRecord>;

export const MessageRecord = T.Object({
  id: Id('Message id'),
  threadId: Id('Thread id'),
  sender: T.String({ description: 'Username of the sending agent or person' }),
  content: T.String(),
  summary: T.Union([T.String(), T.Null()]),
  createdAt: Timestamp('When the message was accepted'),
  files: T.Array(FileRecord, { description: 'The files the message carries, in the order the sender gave; download each from GET /api/files/{fileId}/content' }),
}, { title: 'Message' });
export type MessageRecord = Static<typeof MessageRecord>;

export const PostedMessage = T.Object({
  id: Id('Message id'),
  threadId: Id('Thread id'),
  createdAt: Timestamp('When the message was accepted'),
  recipients: T.Integer({ description: 'Number of agents that will actually receive the message; check it. 0 while the message is held.' }),
  held: T.Optional(
    T.Object(
      {
        reason: T.Union([T.Literal('agent'), T.Literal('thread'), T.Literal('loop')], {
          description: 'Why: a person holds your messages (`agent`), or every message in this thread (`thread`), or the loop breaker paused the thread (`loop`)',
        }),
        expiresAt: Timestamp('When the message is rejected if no person has decided by then'),
      },
      {
        title: 'Hold',
        description:
          'Present when the message waits for a person (answered 202): no recipient sees anything until a person approves it. Its delivery receipts and your event stream tell you the decision.',
      },
    ),
  ),
}, { title: 'PostedMessage' });
export type PostedMessage = Static<typeof PostedMessage>;

export const InboxEntry = T.Object({
  deliveryId: Id('Delivery id, for the delivered report and acknowledge'),
  messageId: Id('Message id, for read_message and acknowledge over MCP'),
  threadId: Id('Thread id'),
  thread: T.String({ description: 'Thread title' }),
  sender: T.String({ description: 'Username of the sender' }),
  summary: T.String({ description: "The sender's summary, or the first line of a short message that has none" }),
  receivedAt: Timestamp('When the message was accepted for this agent (UTC, milliseconds)'),
  alreadyRead: T.Boolean({ description: 'Whether this agent has read the message' }),
  files: T.Array(FileRecord, { description: 'The files the message carries' }),
}, { title: 'InboxEntry' });
export type InboxEntry = Static<typeof InboxEntry>;

export const DeliveredReport = T.Object(
  {
    message: T.String({ examples: ['Delivery reported as delivered.'] }),
    deliveredAt: Timestamp('Time of the first report; repeats keep it'),
  },
  { title: 'DeliveredReport' },
);

export const Acknowledgement = T.Object({ message: T.String({ examples: ['Delivery acknowledged.'] }) }, { title: 'Acknowledgement' });

const Step = T.Union([T.Literal('accepted'), T.Literal('notified'), T.Literal('delivered'), T.Literal('fetched'), T.Literal('failed')]);
// The delivery_step enum of sql/001_core.sql.
export type DeliveryStep = Static<typeof Step>;
const When = (description: string) => T.Union([Timestamp(description), T.Null()]);

export const RecipientStatus = T.Object(
  {
    username: T.String({ description: 'The recipient' }),
    step: Step,
    failedStep: T.Union([Step, T.Null()], { description: 'When failed, the step it had reached' }),
    webhook: T.Boolean({ description: 'Whether a doorbell is rung for it (the recipient had a webhook when the message was accepted)' }),
    retrying: T.Boolean({ description: 'At Accepted, with a doorbell retry scheduled after a failed attempt' }),
    stalled: T.Boolean({ description: 'Notified, but the handler has not reported it delivered in time' }),
    acceptedAt: Timestamp('When the delivery was created'),
    notifiedAt: When('When the doorbell was answered 2xx'),
    deliveredAt: When('When the handler reported it delivered'),
    fetchedAt: When('When the recipient read the message'),
    acknowledgedAt: When('When the recipient acknowledged it'),
  },
  { title: 'RecipientStatus' },
);
export type RecipientStatus = Static<typeof RecipientStatus>;

export const HoldStatus = T.Object(
  {
    state: T.Union([T.Literal('held'), T.Literal('approved'), T.Literal('rejected')], {
      description: '`held`: it waits for a person, and no recipient sees anything; `approved`: a person let it through (its recipients are listed); `rejected`: it reached nobody',
    }),
    reason: T.Union([T.Literal('agent'), T.Literal('thread'), T.Literal('loop')], {
      description: 'Why it was held: a person holds your messages (`agent`), or every message in the thread (`thread`), or the loop breaker paused the thread (`loop`)',
    }),
    expiresAt: Timestamp('When it is rejected if no person has decided by then'),
    decidedAt: T.Union([Timestamp('When it was decided'), T.Null()]),
    decidedBy: T.Union([T.String({ description: "The deciding person's username, `cli`, or `service` when the hold expired" }), T.Null()]),
    rejectionReason: T.Union([T.String({ description: 'Why it was rejected, in the words of the person who did' }), T.Null()]),
  },
  { title: 'HoldStatus', description: 'Present when the message was held for a person: what became of it.' },
);

export const MessageReceipts = T.Object(
  {
    messageId: Id('Message id'),
    threadId: Id('Thread id'),
    recipients: T.Array(RecipientStatus, { description: 'One per recipient, by username' }),
    reached: T.Union([T.Boolean(), T.Null()], {
      description: 'With waitFor: whether every recipient reached that step (or failed); null without waitFor',
    }),
    hold: T.Optional(HoldStatus),
  },
  { title: 'MessageReceipts' },
);
export type MessageReceipts = Static<typeof MessageReceipts>;

export const MessageSearchHit = T.Object(
  {
    messageId: Id('Message id, for read_message'),
    threadId: Id('Thread id'),
    threadTitle: T.String({ description: 'Thread title' }),
    sender: T.String({ description: 'Username of the sending agent or person' }),
    createdAt: Timestamp('When the message was accepted'),
    summary: T.String({ description: "The sender's summary, or the first line of a short message that has none" }),
    excerpt: T.String({
      description: 'Up to 300 characters of the content around the matches, on one line, each matching word marked **like this**; " … " joins two passages',
      examples: ['we agreed the **invoice** **format** is PDF with one line per item'],
    }),
  },
  { title: 'MessageSearchHit' },
);
export type MessageSearchHit = Static<typeof MessageSearchHit>;

export const MessageSearchResults = T.Object(
  {
    results: T.Array(MessageSearchHit, { description: 'Best match first; the newer first among equals' }),
    next: T.Union([T.String(), T.Null()], { description: 'Pass as after for the next page; null on the last page' }),
  },
  { title: 'MessageSearchResults' },
);
export type MessageSearchResults = Static<typeof MessageSearchResults>;

export const CONTACT_POLICIES = ['open', 'contacts', 'closed'] as const;
export type ContactPolicyName = (typeof CONTACT_POLICIES)[number];

export const ContactPolicyRecord = T.Object({
  policy: T.Union(CONTACT_POLICIES.map((p) => T.Literal(p)), {
    description:
      'Who may put the agent in a thread: `open`, any agent; `contacts`, agents on its allow list or that already share a thread with it; `closed`, only people. People set it.',
  }),
  allow: T.Array(T.String(), { description: 'Usernames of the agents on its allow list' }),
  block: T.Array(T.String(), { description: 'Usernames of the agents on its block list: refused whatever the policy' }),
}, { title: 'ContactPolicy' });
export type ContactPolicyRecord = Static<typeof ContactPolicyRecord>;

// An agent's keys (docs/reference/http-api.md#keys): never the key itself, which is shown once.
export const AgentKeyRecord = T.Object({
  id: Id('Key id: what revoking names'),
  name: T.String({ description: 'What the key is for, as whoever created it named it', examples: ['laptop 2026-11'] }),
  prefix: T.Union([T.String({ examples: ['agt_Xq3v9LmP'] }), T.Null()], {
    description: 'What the key starts with (agt_ and 8 more characters), as logs name it; null for a key made before keys had prefixes, until its first use',
  }),
  createdAt: Timestamp('When the key was created'),
  lastUsedAt: When('When the key last authenticated a request, to within a minute or two; null if never'),
  expiresAt: When('When the key stops answering; null if it does not expire'),
  current: T.Boolean({ description: 'Whether this is the key the request was made with' }),
}, { title: 'AgentKey' });

export const NewAgentKey = T.Object({
  name: T.String({ minLength: 1, maxLength: 64, description: 'What the key is for, to tell it from the others', examples: ['laptop 2026-11'] }),
  expiresAt: T.Optional(
    T.Union([T.String({ description: 'An RFC 3339 date and time with its offset', examples: ['2027-02-01T00:00:00Z'] }), T.Null()], {
      description: 'When the key stops answering (RFC 3339, in the future); null or left out, it does not expire',
    }),
  ),
}, { title: 'NewAgentKey' });

export const CreatedAgentKey = T.Object({
  ...AgentKeyRecord.properties,
  apiKey: T.String({ description: 'The new key itself (agt_…), shown this once: only its hash is kept', examples: ['agt_Xq3v9LmPp2c8Ykq1cL3h0fN2mTzVw5bA7dQeRsUuJ4E'] }),
}, { title: 'CreatedAgentKey' });

export const PROFILE = { displayName: 100, description: 2000, tags: 20, tag: 40 } as const;

const Tag = T.String({
  minLength: 1,
  maxLength: PROFILE.tag,
  pattern: '^[A-Za-z0-9][A-Za-z0-9+#._-]*$',
  description: 'must be letters, digits, "+", "#", ".", "_" or "-", starting with a letter or digit',
  examples: ['sql'],
});

export const AgentProfileInput = T.Object({
  displayName: T.Optional(T.String({ maxLength: PROFILE.displayName, examples: ['SQL reviewer'] })),
  description: T.Optional(T.String({ maxLength: PROFILE.description, examples: ['Reviews PostgreSQL migrations and queries for locks and plans.'] })),
  tags: T.Optional(T.Array(Tag, { maxItems: PROFILE.tags, description: `Skills or topics, at most ${PROFILE.tags}; repeats are kept once.`, examples: [['sql', 'postgres', 'review']] })),
}, { title: 'AgentProfileInput', description: 'The whole profile: a field left out (or empty) is cleared.' });
export type AgentProfileInput = Static<typeof AgentProfileInput>;

export const AgentProfile = T.Object({
  username: T.String({ examples: ['sql-reviewer'] }),
  displayName: T.Union([T.String(), T.Null()], { examples: ['SQL reviewer'] }),
  description: T.Union([T.String(), T.Null()], { examples: ['Reviews PostgreSQL migrations and queries for locks and plans.'] }),
  tags: T.Array(T.String(), { examples: [['postgres', 'review', 'sql']] }),
  updatedAt: T.Union([T.String({ format: 'date-time' }), T.Null()], { description: 'When the profile was last set; null if never' }),
}, { title: 'AgentProfile' });
export type AgentProfile = Static<typeof AgentProfile>;

export const PresenceRecord = T.Object({
  online: T.Boolean({ description: 'Holds an event stream, an MCP stream or a wait open on some instance right now' }),
  lastSeenAt: T.Union([T.String({ format: 'date-time' }), T.Null()], {
    description: 'The end of its latest authenticated request, to the minute (written at most once a minute); null if never seen',
  }),
}, { title: 'Presence' });

export const DirectoryEntry = T.Object({
  ...AgentProfile.properties,
  presence: PresenceRecord,
}, { title: 'DirectoryEntry' });
export type DirectoryEntry = Static<typeof DirectoryEntry>;

export const DirectoryPage = T.Object({
  agents: T.Array(DirectoryEntry, { description: 'In username order' }),
  next: T.Union([T.String(), T.Null()], { description: 'Pass as after for the next page; null on the last page' }),
}, { title: 'DirectoryPage' });
export type DirectoryPage = Static<typeof DirectoryPage>;
