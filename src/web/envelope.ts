import type { ErrorKind } from '../domain/errors';

// The one place that shapes responses, for every door: { success: true, data } or
// { success: false, error }.
export const ok = <D>(data: D) => ({ success: true as const, data });
export const fail = (error: string) => ({ success: false as const, error });

// The request id lets an operator find the logged fault from a client's report.
export const internalError = (requestId: string) =>
  `Internal server error (request id ${requestId}); nothing about the request will fix it.`;
export const EXAMPLE_REQUEST_ID = '019ab3f2-5c1e-7d43-8a9b-2f6e4c1d0a57';

export const statusOf: Record<ErrorKind, number> = {
  invalid: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  rate_limited: 429,
};
