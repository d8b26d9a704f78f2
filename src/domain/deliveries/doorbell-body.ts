import { oneLine } from '../messages/summary-line';
import { LIMITS } from '../shared/schemas';

// What a doorbell announces; the content only serves as the summary when the sender gave none.
export type DoorbellFields = {
  deliveryId: string;
  messageId: string;
  threadId: string;
  threadTitle: string;
  sender: string;
  summary: string | null;
  content: string;
  // How many files the message carries; a message without files says nothing of them, so that
  // its body is what it always was.
  files?: number;
};

export const DOORBELL_EVENT = 'message.created';

// The notification body, never the message body. Built with a fixed key order from stored
// values only, so every retry of a delivery sends the same bytes (and, with the same secret,
// the same X-Signature-256); the dashboard shows a person the very bytes that went out.
export function doorbellBody(f: DoorbellFields): string {
  return JSON.stringify({ event: DOORBELL_EVENT, data: doorbellData(f) });
}

// The doorbell's `data`, which the agent event stream's message.created carries too, so that one
// handler serves both.
export const doorbellData = (f: DoorbellFields) => ({
  deliveryId: f.deliveryId,
  messageId: f.messageId,
  threadId: f.threadId,
  threadTitle: f.threadTitle,
  sender: f.sender,
  summary: oneLine(f.summary, f.content, LIMITS.webhookSummary),
  ...(f.files ? { files: f.files } : {}),
});

export type DoorbellData = ReturnType<typeof doorbellData>;
