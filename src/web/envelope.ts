import { GOVERNANCE_CODES, type ErrorKind, type GovernanceCode } from '../domain/shared/errors';
import { DASHBOARD_PATH, type DashboardRefusal, type RefusalCode } from './dashboard-protocol';

// The one place that shapes responses, for every door: { success: true, data } or
// { success: false, error }.
export const ok = <D>(data: D) => ({ success: true as const, data });
export const fail = (error: string) => ({ success: false as const, error });
// A refusal people configured carries its machine code beside the sentence at every door
// (GOVERNANCE_CODES); every other public refusal is the contract's bare envelope.
export const failWithCode = (error: string, code: GovernanceCode) => ({ success: false as const, error, code });

// What a refusal says: the sentence for the person, the code for the program, and the input field
// it is about, when it is one.
export type Refusal = { sentence: string; code: RefusalCode; field?: string };

const underDashboard = (request: Request) => {
  const path = new URL(request.url).pathname;
  return path === DASHBOARD_PATH || path.startsWith(`${DASHBOARD_PATH}/`);
};

// The dashboard's own API answers a refusal with its code beside the sentence, so that its pages
// never read the sentence (dashboard-protocol.ts); everywhere else the contract fixes the envelope.
export function refusalFor(request: Request, refusal: Refusal): ReturnType<typeof fail> | DashboardRefusal {
  if (!underDashboard(request)) {
    return isGovernanceCode(refusal.code) ? failWithCode(refusal.sentence, refusal.code) : fail(refusal.sentence);
  }
  const answer: DashboardRefusal = { success: false, error: refusal.sentence, code: refusal.code };
  if (refusal.field !== undefined) answer.field = refusal.field;
  return answer;
}

export const isGovernanceCode = (code: string): code is GovernanceCode => (GOVERNANCE_CODES as readonly string[]).includes(code);

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
  gone: 410,
  too_large: 413,
  rate_limited: 429,
};
