import { Role, TaskState, type Message, type Part, type Task, type TaskStatusUpdateEvent } from '@a2a-js/sdk';
import type { SentDelivery, SentFilter } from '../domain/deliveries/sent-deliveries';
import type { FileRecord, MessageRecord } from '../domain/shared/schemas';
import type { HoldStatus } from '../domain/messages/holds';

// How a delivery reads in A2A's terms (docs/reference/a2a.md): the task is the delivery of the caller's
// message to the agent it was sent to; its context is the thread. The recipient's first message
// in the thread after it is the answer, and completes the task.
export function taskState(sent: SentDelivery): TaskState {
  if (sent.answer) return TaskState.TASK_STATE_COMPLETED;
  switch (sent.status.step) {
    case 'accepted':
      return TaskState.TASK_STATE_SUBMITTED;
    case 'failed':
      return TaskState.TASK_STATE_FAILED;
    default:
      return TaskState.TASK_STATE_WORKING;
  }
}

// The listing's filter for a state asked by name: the same rule as taskState, as conditions on the
// delivery. States no delivery reads as (canceled, rejected, input or auth required) match none.
export function stateFilter(state: TaskState): Pick<SentFilter, 'steps' | 'answered'> {
  switch (state) {
    case TaskState.TASK_STATE_UNSPECIFIED:
      return {};
    case TaskState.TASK_STATE_COMPLETED:
      return { answered: true };
    case TaskState.TASK_STATE_SUBMITTED:
      return { steps: ['accepted'], answered: false };
    case TaskState.TASK_STATE_WORKING:
      return { steps: ['notified', 'delivered', 'fetched'], answered: false };
    case TaskState.TASK_STATE_FAILED:
      return { steps: ['failed'], answered: false };
    default:
      return { steps: [] };
  }
}

const textPart = (value: string): Part => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: 'text/plain' });

// A file a message carries, by its download address (`origin`: where clients reach this service);
// its id, size and hash in the part's metadata.
const filePart = (file: FileRecord, origin: string): Part => ({
  content: { $case: 'url', value: `${origin}/api/files/${file.id}/content` },
  metadata: { fileId: file.id, size: file.size, sha256: file.sha256 },
  filename: file.name,
  mediaType: file.contentType,
});

// The same file as its bytes (`raw`), its address moved to the metadata's `url`.
const bytesPart = (part: Part, url: string, bytes: Buffer): Part => ({ ...part, content: { $case: 'raw', value: bytes }, metadata: { ...part.metadata, url } });

const messagesOf = (task: Task): Message[] => [...task.history, ...(task.status?.message ? [task.status.message] : [])];

// The files a task's messages name by address that are at most `limit` bytes.
export function smallFilesOf(task: Task, limit: number): string[] {
  const ids = messagesOf(task).flatMap((m) =>
    m.parts.filter((p) => p.content?.$case === 'url' && p.metadata?.fileId && p.metadata.size <= limit).map((p) => p.metadata!.fileId as string),
  );
  return [...new Set(ids)];
}

// The task with each file `bytes` holds (by id) handed over as its bytes rather than by address.
export function withFileBytes(task: Task, bytes: Map<string, Buffer>): Task {
  if (bytes.size === 0) return task;
  const inline = (message: Message): Message => ({
    ...message,
    parts: message.parts.map((part) => {
      const data = bytes.get(part.metadata?.fileId);
      return data && part.content?.$case === 'url' ? bytesPart(part, part.content.value, data) : part;
    }),
  });
  return { ...task, history: task.history.map(inline), status: task.status && { ...task.status, message: task.status.message && inline(task.status.message) } };
}

// `messageId` is the id the client gave its message, where it gave one, so that it finds its own
// message in the history; the service's id for it is the task's `metadata.messageId`.
function a2aMessage(message: MessageRecord, messageId: string, role: Role, taskId: string, origin: string): Message {
  return {
    messageId,
    contextId: message.threadId,
    taskId,
    role,
    parts: [textPart(message.content), ...message.files.map((file) => filePart(file, origin))],
    metadata: { sender: message.sender, createdAt: message.createdAt, ...(message.summary ? { summary: message.summary } : {}) },
    extensions: [],
    referenceTaskIds: [],
  };
}

// When the task reached its state: the answer's time, or the step's.
function stateTime(sent: SentDelivery): string {
  const s = sent.status;
  return sent.answer?.createdAt ?? s.fetchedAt ?? s.deliveredAt ?? s.notifiedAt ?? s.acceptedAt;
}

function statusText(sent: SentDelivery): string {
  const { username, step, failedStep, retrying, stalled } = sent.status;
  if (sent.answer) return `${username} answered in the thread.`;
  switch (step) {
    case 'accepted':
      return retrying
        ? `Accepted for ${username}; its webhook did not answer yet and is tried again.`
        : `Accepted for ${username}, in its inbox.`;
    case 'notified':
      return stalled
        ? `${username}'s webhook was told of it, but its handler never reported it delivered.`
        : `${username}'s webhook was told of it.`;
    case 'delivered':
      return `${username}'s handler reported it delivered.`;
    case 'fetched':
      return `${username} has read it.`;
    case 'failed':
      return `${username}'s webhook could not be told of it (the doorbell failed at ${failedStep}); it stays in ${username}'s inbox, where it is read if ${username} looks.`;
  }
}

// The task of one delivery. `historyLength` as A2A defines it: none given, the whole history (the
// message and, once there, its answer); 0, none; n, the newest n. Files are named by their
// address at `origin`.
export function toTask(sent: SentDelivery, historyLength: number | undefined, origin: string): Task {
  const asked = a2aMessage(sent.message, sent.a2aMessageId ?? sent.message.id, Role.ROLE_USER, sent.id, origin);
  const answer = sent.answer?.message ? a2aMessage(sent.answer.message, sent.answer.message.id, Role.ROLE_AGENT, sent.id, origin) : undefined;
  const history = answer ? [asked, answer] : [asked];
  const text: Message = {
    messageId: `${sent.id}-status`,
    contextId: sent.message.threadId,
    taskId: sent.id,
    role: Role.ROLE_AGENT,
    parts: [textPart(statusText(sent))],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
  const { username, ...steps } = sent.status;
  return {
    id: sent.id,
    contextId: sent.message.threadId,
    status: { state: taskState(sent), message: answer ?? text, timestamp: stateTime(sent) },
    artifacts: [],
    history: historyLength === undefined ? history : historyLength <= 0 ? [] : history.slice(-historyLength),
    metadata: { recipient: username, messageId: sent.message.id, ...steps, answerId: sent.answer?.id ?? null },
  };
}

// A move of a task, as a stream and a push tell it.
export const statusUpdate = (task: Task): TaskStatusUpdateEvent => ({
  taskId: task.id,
  contextId: task.contextId,
  status: task.status,
  metadata: task.metadata,
});

// The task of a message held for a person (domain/messages/holds.ts): it has no delivery yet, so
// the task is named by the message. Held, it is submitted (received, nothing done with it yet);
// rejected, it is A2A's rejected, with the person's reason. Approved, it becomes its delivery's task.
export function heldTask(hold: HoldStatus & { messageId: string; threadId: string }, recipient: string): Task {
  const text =
    hold.state === 'rejected'
      ? `Not sent to ${recipient}: ${hold.rejectionReason}`
      : `Waits for a person's approval before ${recipient} sees it; rejected if nobody decides by ${hold.expiresAt}.`;
  const message: Message = {
    messageId: `${hold.messageId}-status`,
    contextId: hold.threadId,
    taskId: hold.messageId,
    role: Role.ROLE_AGENT,
    parts: [textPart(text)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
  return {
    id: hold.messageId,
    contextId: hold.threadId,
    status: {
      state: hold.state === 'rejected' ? TaskState.TASK_STATE_REJECTED : TaskState.TASK_STATE_SUBMITTED,
      message,
      timestamp: hold.decidedAt ?? hold.expiresAt,
    },
    artifacts: [],
    history: [],
    metadata: { recipient, messageId: hold.messageId, hold },
  };
}
