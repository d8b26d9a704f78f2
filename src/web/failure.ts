import { Overloaded } from '../db/batcher';
import { DATABASE_UNAVAILABLE, isDatabaseUnavailable, isStatementStopped } from '../db/unavailable';
import { ClientLeft, DomainError, type ErrorKind } from '../domain/shared/errors';
import { SearchesBusy } from '../domain/shared/search-gate';
import { BodyTooLarge } from './body';
import type { RefusalCode } from './dashboard-protocol';
import { internalError, statusOf, type Refusal } from './envelope';

// What any door answers for an error: the status it stands for, the sentence, the code and field
// (for the dashboard, envelope.ts), whether the client should wait a moment (Retry-After), and what
// the door logs: nothing for a refusal, a warning (this event) for the database being away or a
// statement stopped at its time bound, the stack for a fault. One mapping for HTTP, MCP and every door to come.
// retryAfter: true for a moment (1 s), or the seconds until trying again can succeed.
export type FailureAnswer = Refusal & { status: number; retryAfter: boolean | number; log: 'database_unavailable' | 'statement_timeout' | 'fault' | null };

export const STATEMENT_TOO_LONG =
  'The request took longer in the database than the service allows and was stopped; nothing was changed. Retry in a moment, or ask for less.';

// A refusal the kernel makes itself (the dashboard's guard), with a code more specific than its kind.
export class KernelRefusal extends DomainError {
  constructor(
    kind: ErrorKind,
    message: string,
    readonly code: RefusalCode,
  ) {
    super(kind, message);
  }
}

export function failureOf(error: unknown, requestId: string): FailureAnswer {
  if (error instanceof DomainError) {
    const code = error instanceof KernelRefusal ? error.code : (error.detail.code ?? error.kind);
    const retryAfter = error.detail.retryAfterSeconds ?? false;
    return { status: statusOf[error.kind], sentence: error.message, code, field: error.field, retryAfter, log: null };
  }
  if (error instanceof BodyTooLarge) return { status: 413, sentence: error.message, code: 'too_large', retryAfter: false, log: null };
  if (error instanceof Overloaded || error instanceof SearchesBusy) return { status: 503, sentence: error.message, code: 'busy', retryAfter: true, log: null };
  // Nobody reads this answer; 499 is what proxies record for a client that closed the request.
  if (error instanceof ClientLeft) return { status: 499, sentence: error.message, code: 'client_left', retryAfter: false, log: null };
  if (isStatementStopped(error)) {
    return { status: 503, sentence: STATEMENT_TOO_LONG, code: 'busy', retryAfter: true, log: 'statement_timeout' };
  }
  if (isDatabaseUnavailable(error)) {
    return { status: 503, sentence: DATABASE_UNAVAILABLE, code: 'unavailable', retryAfter: false, log: 'database_unavailable' };
  }
  return { status: 500, sentence: internalError(requestId), code: 'internal', retryAfter: false, log: 'fault' };
}
