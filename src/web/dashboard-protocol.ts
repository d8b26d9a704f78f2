// What the dashboard's server and its browser code (src/dashboard/web) agree on, written once. A
// leaf module, imported by both: the browser code may import nothing with server imports. It sits
// in the kernel because the kernel's half of the dashboard (the session guard, the envelope) speaks
// it too, and the kernel imports no door.

// Everything the dashboard serves is under this path: its pages, its private API and the consent
// page's routes. A refusal there carries a code (below); the public surfaces' envelope, fixed by
// the contract, has none.
export const DASHBOARD_PATH = '/dashboard';
export const DASHBOARD_API = `${DASHBOARD_PATH}/api`;

// The header the dashboard's scripts send with every request. A cross-site page cannot add it
// without a CORS preflight, which this server never grants, so a state change without it is refused.
export const CSRF_HEADER = 'x-requested-with';
export const CSRF_VALUE = 'fetch';

// What went wrong, for the browser to branch on; the sentence beside it is for the person.
export const REFUSAL_CODES = [
  // A refusal of the domain, by its kind (domain/shared/errors.ts), when nothing below is more specific.
  'invalid',
  'unauthorized',
  'forbidden',
  'not_found',
  'conflict',
  'gone',
  'rate_limited',
  // A refusal people configured (domain/shared/errors.ts GOVERNANCE_CODES): every door sends these.
  'contact_policy',
  'blocked',
  'quota_exceeded',
  // The dashboard's guard: no session (none, expired or signed out), an agent key, a cross-site
  // state change.
  'no_session',
  'agent_key',
  'cross_site',
  // The request or the service: a body over the limit, no such route, a client that left before its
  // answer, the database too busy or away, a fault of ours.
  'too_large',
  'no_route',
  'client_left',
  'busy',
  'unavailable',
  'internal',
] as const;
export type RefusalCode = (typeof REFUSAL_CODES)[number];

// A refusal under DASHBOARD_PATH. `field` names the input it is about, when it is one.
export type DashboardRefusal = { success: false; error: string; code: RefusalCode; field?: string };

// The live stream of an open page (GET DASHBOARD_API + STREAM_PATH): the events it sends, and how
// long the browser waits before it connects again after the stream drops.
export const STREAM_PATH = '/deliveries/events';
export type StreamEvent = 'ready' | 'delivery' | 'thread' | 'agent' | 'session-ended';
export const STREAM_RETRY_MS = 2000;

// How a session stopped admitting its person (domain/people/people.ts SessionEnd), as the stream's last
// event says it ({ error: sentence, code }) and as the sign-in page's `ended` parameter names it.
export const SESSION_ENDED = {
  expired: { code: 'session_expired', sentence: 'Your session expired; sign in again.' },
  'signed-out': { code: 'signed_out', sentence: 'You signed out; sign in again.' },
} as const;
export type SessionEndCode = (typeof SESSION_ENDED)[keyof typeof SESSION_ENDED]['code'];
