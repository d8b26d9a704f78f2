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
  lastError: string | null;
  createdAt: string;
  notifiedAt: string | null;
  deliveredAt: string | null;
  fetchedAt: string | null;
  acknowledgedAt: string | null;
  payload: string | null;
  attempts: Attempt[];
};

export type Attention = { failed: number; retrying: number; stalled: number; closeRequests: number; nextStallAt: string | null };

export type Thread = {
  id: string;
  title: string;
  goal: string | null;
  state: ThreadState;
  openedBy: string;
  createdAt: string;
  participants: { username: string }[];
};

export type ThreadMessage = {
  id: string;
  sender: string;
  content: string;
  summary: string | null;
  createdAt: string;
  deliveries: (Progress & { deliveryId: string; recipient: string })[];
};

export type Connection = {
  grantId: string;
  clientId: string;
  clientName: string | null;
  approvedBy: string | null;
  approvedAt: string;
  lastUsedAt: string | null;
};

export type Agent = {
  id: string;
  username: string;
  archived: boolean;
  webhookUrl: string | null;
  createdAt: string;
  connections: Connection[];
};

// A registered agent, with its key (shown once) and its webhook's signing secret, if it has one.
export type CreatedAgent = { username: string; apiKey: string; signingSecret?: string | null };

// An MCP client's request to act as an agent (src/oauth/consent.ts).
export type ConsentRequest = {
  client: { clientId: string; name: string | null; uri: string | null; redirectUri: string; metadataDocument: boolean };
  resource: string;
  agents: string[];
};
