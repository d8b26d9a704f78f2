// What a doorbell attempt's outcome means, by the contract's schedule: one attempt plus one retry
// per configured delay (1 s, 12 s, 148 s by default), then Failed at the step reached. A 2xx
// answer is the only success. A 401 means the handler could not verify the signature (an old
// secret, say): retrying the same bytes cannot help, so it is Failed at once, recorded and
// resendable. The worker sends and reports; it asks here what came of it.
export type RetryPolicy = { delaysMs: number[] };

// What the sender brings back from one attempt.
export type AttemptOutcome = {
  status: number | null;
  error: string | null;
  // The first KiB of the handler's answer, as text; null when none came.
  responseBody?: string | null;
  // The headers that went out, signatures elided; none when nothing was sent.
  requestHeaders?: Record<string, string>;
  // The handler's answer's headers, as many as fit RESPONSE_HEADERS_KEPT; none when none came.
  responseHeaders?: Record<string, string>;
};

export type AfterAttempt =
  | { kind: 'notified' }
  | { kind: 'retry'; delayMs: number }
  | { kind: 'failed'; error: string };

export const maxAttempts = (policy: RetryPolicy) => policy.delaysMs.length + 1;

export const answeredOk = (status: number | null) => status !== null && status >= 200 && status < 300;

// The attempt in a person's words: what went wrong on the wire, or the status the handler gave.
export const describeOutcome = (o: { status: number | null; error: string | null }) =>
  o.status === null ? (o.error ?? 'no response') : `the handler answered HTTP ${o.status}`;

// The kind of a failed attempt, short enough to group failures by: the status it answered, or what
// went wrong on the wire without the details ("connection failed (ECONNREFUSED)", "refused to send").
export const failureKind = (o: { status: number | null; error: string | null }) =>
  o.status !== null ? `HTTP ${o.status}` : (o.error ?? 'no response').split(':')[0]!.trim();

const gaveUp = (attempts: number | string, lastOne: string) => `Gave up after ${attempts} attempts; the last one${lastOne}.`;

// The recorded error of a delivery whose last attempt was cut off mid-way (see
// recordInterruptedAttempt), as a format() template for the attempt count the database holds.
export const GAVE_UP_AFTER_CUT_OFF_TEMPLATE = gaveUp('%s', ' was cut off before its outcome was recorded');

export function afterAttempt(outcome: AttemptOutcome, attempt: number, policy: RetryPolicy): AfterAttempt {
  if (answeredOk(outcome.status)) return { kind: 'notified' };
  if (outcome.status === 401) {
    return { kind: 'failed', error: 'The handler answered HTTP 401: it could not verify the signature; not retried.' };
  }
  const delayMs = policy.delaysMs[attempt - 1];
  if (delayMs !== undefined) return { kind: 'retry', delayMs };
  return { kind: 'failed', error: gaveUp(attempt, `: ${describeOutcome(outcome)}`) };
}
