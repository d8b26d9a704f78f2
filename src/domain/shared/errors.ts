// What went wrong, in the domain's words. Each door maps a kind to its own signal (an HTTP status,
// an MCP tool error, a CLI exit code); the sentence travels unchanged.
export type ErrorKind = 'invalid' | 'unauthorized' | 'forbidden' | 'not_found' | 'conflict' | 'gone' | 'too_large' | 'rate_limited';

// `field` names the input a refusal is about, when it is one, so that a form can show the sentence
// beside it without reading the sentence. `code`, where a kind alone does not tell a program what
// to do (a contact policy or a quota): every door carries it beside the sentence. `retryAfterSeconds`:
// when trying again can succeed (a quota's window ends).
export type RefusalDetail = { code?: GovernanceCode; retryAfterSeconds?: number };
export class DomainError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
    readonly field?: string,
    readonly detail: RefusalDetail = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const invalid = (message: string, field?: string) => new DomainError('invalid', message, field);
export const unauthorized = (message: string) => new DomainError('unauthorized', message);
export const forbidden = (message: string) => new DomainError('forbidden', message);
export const notFound = (message: string) => new DomainError('not_found', message);
export const conflict = (message: string) => new DomainError('conflict', message);
// What the caller asked for existed and no longer does (an event stream's cursor past retention).
export const gone = (message: string) => new DomainError('gone', message);
// What was sent is more than may be kept: a file over the size limit, or past its uploader's quota.
export const tooLarge = (message: string) => new DomainError('too_large', message);
export const rateLimited = (message: string) => new DomainError('rate_limited', message);

// Refusals people configured: the recipient's contact policy or block list, or a send quota.
export const GOVERNANCE_CODES = ['contact_policy', 'blocked', 'quota_exceeded'] as const;
export type GovernanceCode = (typeof GOVERNANCE_CODES)[number];
export const refusedByPolicy = (message: string, code: 'contact_policy' | 'blocked') => new DomainError('forbidden', message, undefined, { code });
export const overQuota = (message: string, retryAfterSeconds: number) =>
  new DomainError('rate_limited', message, undefined, { code: 'quota_exceeded', retryAfterSeconds });

// The caller went away before its answer (the request aborted): what it asked was stopped, and
// nobody is left to tell.
export class ClientLeft extends Error {
  constructor() {
    super('The client left before the answer.');
    this.name = 'ClientLeft';
  }
}
