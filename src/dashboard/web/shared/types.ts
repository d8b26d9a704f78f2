import type { DeliveryState, ThreadState } from '../../../domain/shared/state-names.ts';

// The JSON the dashboard's API answers, as the pages read it (the server's own types are in
// src/domain, which this code cannot import: it runs in the browser).

// A delivery's stored step: every state but the two read from it.
export type Step = Exclude<DeliveryState, 'retrying' | 'stalled'>;

export type Page<T> = { items: T[]; next: string | null };

export type Attempt = {
  attemptedAt: string;
  publish: number;
  attempt: number;
  resend: number;
  status: number | null;
  durationMs: number;
  error: string | null;
  responseBody: string | null;
  requestHeaders: Record<string, string> | null;
  interrupted: boolean;
  // Null for attempts logged before the address was kept.
  url: string | null;
  // Null when no answer came.
  responseHeaders: Record<string, string> | null;
};

// What a delivery reads as, in a list or beside a message.
export type Progress = { step: Step; failedStep: Step | null; stalled: boolean; retrying: boolean };

export type Delivery = Progress & {
  id: string;
  messageId: string;
  threadId: string;
  thread: string;
  sender: string;
  summary: string;
  recipient: string;
  error: string | null;
  webhook: boolean;
  stallsAt: string | null;
  nextAttemptAt: string | null;
  // Due, but held until its endpoint has a free slot: nextAttemptAt has passed and means nothing.
  waitingForSlot: boolean;
  lastError: string | null;
  createdAt: string;
  notifiedAt: string | null;
  deliveredAt: string | null;
  fetchedAt: string | null;
  acknowledgedAt: string | null;
  payload: string | null;
  attempts: Attempt[];
};

export type Attention = {
  failed: number;
  retrying: number;
  stalled: number;
  closeRequests: number;
  waiting: number;
  paused: number;
  nextStallAt: string | null;
};

export type Thread = {
  id: string;
  title: string;
  goal: string | null;
  state: ThreadState;
  openedBy: string;
  createdAt: string;
  participants: { username: string }[];
};

// A thread on its own page, with what people decide about it (agents are not shown these): every
// agent's message here waits for a person, the loop breaker paused it, and the loop breaker's setting.
export type PeoplesThread = Thread & {
  holdsMessages: boolean;
  waiting: number;
  pausedAt: string | null;
  loopBreaker: { messages: number; windowMinutes: number };
};

// The answer of PUT /threads/:threadId/holds and POST /threads/:threadId/resume.
export type ThreadHolds = { id: string; holdsMessages: boolean; pausedAt: string | null };

// A thread as the Threads page lists it: its last activity, and its place in that order (what
// `since` and `after` take back).
export type ListedThread = Thread & { lastActivityAt: string; cursor: string };

export type ThreadMessage = {
  id: string;
  sender: string;
  content: string;
  summary: string | null;
  createdAt: string;
  deliveries: (Progress & { deliveryId: string; recipient: string })[];
  files: MessageFile[];
};

// A file a message carries (src/domain/shared/schemas.ts FileRecord).
export type MessageFile = { id: string; name: string; contentType: string; size: number; sha256: string };

// One of an agent's keys (src/domain/agents/agent-keys.ts); `apiKey` only in the answer that made it.
export type AgentKey = {
  id: string;
  name: string;
  prefix: string | null;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
};
export type CreatedKey = AgentKey & { apiKey: string };

export type Connection = {
  grantId: string;
  clientId: string;
  clientName: string | null;
  approvedBy: string | null;
  approvedAt: string;
  lastUsedAt: string | null;
};

// Who may put an agent in a thread (src/domain/agents/contact-policy.ts).
export type ContactPolicy = 'open' | 'contacts' | 'closed';
export type ContactList = 'allow' | 'block';
export type Contacts = { username: string; policy: ContactPolicy; allow: string[]; block: string[] };

export type Agent = {
  id: string;
  username: string;
  archived: boolean;
  // Its A2A card is served to anyone, not only to agents of this service.
  cardListed: boolean;
  webhookUrl: string | null;
  webhookSetAt: string | null;
  previousSecretExpiresAt: string | null;
  createdAt: string;
  connections: Connection[];
  // Null without a webhook.
  health: EndpointHealth | null;
  lastTestEvent: TestEvent | null;
  profile: { displayName: string | null; description: string | null; tags: string[] };
  presence: Presence;
  // Its place in the list's order.
  cursor: string;
};

// A named agent whose webhook is in trouble (GET /webhook-trouble): the pages that list its
// deliveries say so.
export type WebhookTrouble = {
  username: string;
  state: string;
  failure: string | null;
  failingSince: string | null;
  disabledAt: string | null;
  disabledReason: string | null;
};

// Online now on any instance, and the latest authenticated request (to the minute).
export type Presence = { online: boolean; lastSeenAt: string | null };
export type AgentProfile = Agent['profile'] & { username: string; updatedAt: string | null };

// What people set about an agent's sending; a null quota is the deployment's default (0: none).
export type SendQuotas = { messagesPerMinute: number | null; threadsPerHour: number | null };
export type AgentGovernance = SendQuotas & {
  username: string;
  contactPolicy: 'open' | 'contacts' | 'closed';
  holdsMessages: boolean;
  defaults: { messagesPerMinute: number; threadsPerHour: number };
};

// An endpoint's attempts over the last hour or day of five-minute windows: counts, mean and max
// exact; p95UnderMs only a bucket bound ("95 % under 2.5 s"), null when none is known.
export type WindowFigures = {
  attempts: number;
  successes: number;
  // A fraction (0–1); null without attempts.
  successRate: number | null;
  // The attempts the mean and max are of.
  timed: number;
  meanMs: number | null;
  maxMs: number | null;
  p95UnderMs: number | null;
};

// True figures over the endpoint's latest attempts (at most 100), since the oldest's start.
export type RecentFigures = { attempts: number; since: string | null; p50Ms: number | null; p95Ms: number | null; maxMs: number | null };

// `disabled`: switched off by the service for failing; `paused`: by a person, by hand.
export type EndpointState = 'untried' | 'healthy' | 'slow' | 'not-reporting' | 'failing' | 'disabled' | 'paused';

export type EndpointHealth = {
  state: EndpointState;
  lastSuccessAt: string | null;
  lastFailureAt: string | null;
  lastFailureStatus: number | null;
  lastFailureError: string | null;
  // The first 200 characters of the handler's answer to the last failed attempt.
  lastFailureBody: string | null;
  consecutiveFailures: number;
  failingSince: string | null;
  warnedStage: number;
  warnedAt: string | null;
  warnStages: number;
  switchesOffAt: string | null;
  disabledAt: string | null;
  disabledReason: string | null;
  // Who paused it (a person's username, or `cli`); null unless paused.
  pausedBy: string | null;
  // Deliveries notified but not reported delivered in time (stalled).
  stalled: number;
  slowMs: number;
  recent: RecentFigures;
  lastHour: WindowFigures;
  lastDay: WindowFigures;
};

// GET /agents/:username/webhook/series: the windows with attempts, oldest first.
export type EndpointWindow = { at: string; attempts: number; successes: number; failures: number; meanMs: number | null; maxMs: number | null };
export type EndpointSeries = { username: string; windowMinutes: number; hours: number; since: string; windows: EndpointWindow[] };

// A `ping` a person sent to an agent's webhook; attemptedAt is null while it is on its way.
export type TestEvent = {
  id: string;
  url: string;
  requestedBy: string;
  requestedAt: string;
  attemptedAt: string | null;
  durationMs: number | null;
  status: number | null;
  error: string | null;
  ok: boolean | null;
  responseBody: string | null;
  requestHeaders: Record<string, string> | null;
  responseHeaders: Record<string, string> | null;
};

// The answers of POST /agents/:username/webhook/enable, /pause and /resume, and of the bulk resend.
export type Refused = { reason: string; count: number }[];
export type Enabled = { username: string; enabled: true; passingTest: boolean; resent: number; refused: Refused };
export type Resumed = { username: string; resumed: true; resent: number; refused: Refused };
export type Paused = { username: string; paused: true; pausedAt: string; pausedBy: string; reason: string | null };

export type OverviewBin = {
  at: string;
  // Accepted, by what each waits for: a polling agent to fetch it, or its doorbell to be rung.
  waitingForPoll: number;
  doorbellOwed: number;
  retrying: number;
  notified: number;
  delivered: number;
  fetched: number;
  failed: number;
  // From acceptance to the handler's 2xx.
  doorbellP50Ms: number | null;
  doorbellP95Ms: number | null;
};

export type EndpointTrouble = {
  username: string;
  url: string;
  state: 'failing' | 'disabled' | 'paused';
  failure: string;
  failingSince: string;
  disabledAt: string | null;
  warnedStage: number;
  warnStages: number;
  warnedAt: string | null;
  switchesOffAt: string | null;
  lastFailureStatus: number | null;
  lastFailureBody: string | null;
  // Failed or retrying deliveries to it accepted since countedSince.
  deliveries: number;
  countedSince: string;
};

export type Headline = {
  // Accepted since the overview's `since`, and Failed of those now.
  deliveries: number;
  failed: number;
  // Attempts at webhooks in the last 24 hours, and those not answered 2xx.
  attempts: number;
  attemptsFailed: number;
  // Webhooks by state; a state this page does not know is shown by its name.
  endpoints: Record<string, number>;
  stalledAgents: number;
};

export type Overview = {
  since: string;
  headline: Headline;
  binMinutes: number;
  bins: OverviewBin[];
  doorbellP50Ms: number | null;
  doorbellP95Ms: number | null;
  trouble: EndpointTrouble[];
  troubleTotal: number;
  troubleGroups: { failure: string; endpoints: number; disabled: number }[];
  stalledAgents: { username: string; stalled: number; oldestNotifiedAt: string }[];
  closeRequests: { threadId: string; title: string; requestedAt: string | null }[];
  holds: { waiting: number; paused: { threadId: string; title: string; pausedAt: string }[] };
};

// A message waiting for a person's approval (src/domain/messages/holds.ts).
export type WaitingMessage = {
  id: string;
  threadId: string;
  threadTitle: string;
  sender: string;
  recipients: string[];
  summary: string | null;
  content: string;
  reason: 'agent' | 'thread' | 'loop';
  createdAt: string;
  expiresAt: string;
  context: { sender: string; line: string; createdAt: string }[];
};

export type Decided = { approved: string[]; rejected: { id: string; reason: string }[] };

// A registered agent, with its key (shown once) and its webhook's signing secret, if it has one.
export type CreatedAgent = { username: string; apiKey: string; signingSecret?: string | null };

// An MCP client's request to act as an agent (src/oauth/consent.ts).
export type ConsentRequest = {
  client: { clientId: string; name: string | null; uri: string | null; redirectUri: string; metadataDocument: boolean };
  resource: string;
  agents: string[];
};

// An entry of the audit trail (GET /audit).
export type AuditEntry = {
  id: string;
  at: string;
  actor: string;
  action: string;
  subjectType: 'agent' | 'thread' | 'message' | 'delivery' | 'person' | 'operator_webhook';
  subject: string;
  before: unknown;
  after: unknown;
  reason: string | null;
};

// An operator webhook and its health (GET /operator-webhooks; domain/people/operator-webhooks.ts).
export type NoticeAttempt = {
  noticeId: string;
  event: string;
  attempt: number;
  attemptedAt: string;
  durationMs: number;
  status: number | null;
  error: string | null;
  responseBody: string | null;
  outcome: 'delivered' | 'retrying' | 'gave_up';
};

export type OperatorWebhook = {
  id: string;
  url: string;
  format: 'slack' | 'json';
  source: 'dashboard' | 'environment';
  addedBy: string;
  addedAt: string;
  health: {
    state: 'untried' | 'healthy' | 'failing';
    lastSuccessAt: string | null;
    lastFailureAt: string | null;
    lastFailure: string | null;
    failingSince: string | null;
  };
  pending: number;
  recentAttempts: NoticeAttempt[];
};

export type OperatorWebhooks = { webhooks: OperatorWebhook[]; dashboardLinks: boolean };
