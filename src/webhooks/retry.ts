// What one doorbell attempt leads to, by the contract's schedule: 1 attempt plus one retry per
// configured delay (1 s, 12 s, 148 s by default), then Failed at the step reached. A 401 means
// the handler could not verify the signature (an old secret, say): retrying the same bytes
// cannot help, so it is Failed at once, recorded and resendable.
export type AttemptOutcome = {
  status: number | null;
  error: string | null;
  // The first KiB of the handler's answer, as text; null when none came.
  responseBody?: string | null;
  // The headers that went out, signatures elided; none when nothing was sent.
  requestHeaders?: Record<string, string>;
};

export type AfterAttempt =
  | { kind: 'notified' }
  | { kind: 'retry'; delayMs: number }
  | { kind: 'failed'; error: string };

export function describeOutcome(o: AttemptOutcome): string {
  return o.status === null ? (o.error ?? 'no response') : `the handler answered HTTP ${o.status}`;
}

export function afterAttempt(outcome: AttemptOutcome, attempt: number, delaysMs: number[]): AfterAttempt {
  if (outcome.status !== null && outcome.status >= 200 && outcome.status < 300) return { kind: 'notified' };
  if (outcome.status === 401) {
    return { kind: 'failed', error: 'The handler answered HTTP 401: it could not verify the signature; not retried.' };
  }
  const delayMs = delaysMs[attempt - 1];
  if (delayMs !== undefined) return { kind: 'retry', delayMs };
  return { kind: 'failed', error: `Gave up after ${attempt} attempts; the last one: ${describeOutcome(outcome)}.` };
}
