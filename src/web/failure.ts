import { Overloaded } from '../db/batcher';
import { DATABASE_UNAVAILABLE, isDatabaseUnavailable } from '../db/unavailable';
import { DomainError } from '../domain/errors';
import { BodyTooLarge } from './body';
import { internalError, statusOf } from './envelope';

// What any door answers for an error: the status it stands for, the sentence, whether the client
// should wait a moment (Retry-After), and what the door logs: nothing for a refusal, a warning for
// the database being away, the stack for a fault. One mapping for HTTP, MCP and every door to come.
export type FailureAnswer = { status: number; sentence: string; retryAfter: boolean; log: 'database_unavailable' | 'fault' | null };

export function failureOf(error: unknown, requestId: string): FailureAnswer {
  if (error instanceof DomainError) return { status: statusOf[error.kind], sentence: error.message, retryAfter: false, log: null };
  if (error instanceof BodyTooLarge) return { status: 413, sentence: error.message, retryAfter: false, log: null };
  if (error instanceof Overloaded) return { status: 503, sentence: error.message, retryAfter: true, log: null };
  if (isDatabaseUnavailable(error)) return { status: 503, sentence: DATABASE_UNAVAILABLE, retryAfter: false, log: 'database_unavailable' };
  return { status: 500, sentence: internalError(requestId), retryAfter: false, log: 'fault' };
}
