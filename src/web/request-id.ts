import { randomUUIDv7 } from 'bun';
import { Elysia } from 'elysia';
import { withFields, type Logger } from '../log';

export const REQUEST_ID_HEADER = 'x-request-id';

// A caller's own id is kept when it could not confuse a log reader or a header: printable, no
// spaces, at most 128 characters. Anything else is replaced, not refused: the id is for matching
// a report to the log, never a reason to fail a request.
const SANE_ID = /^[A-Za-z0-9._:\/+=@-]{1,128}$/;

const ids = new WeakMap<Request, string>();

export const requestIdOf = (request: Request): string => ids.get(request) ?? 'unknown';

// The caller's id when it is sane, otherwise a new one.
export const requestIdFrom = (request: Request): string => {
  const given = request.headers.get(REQUEST_ID_HEADER);
  return given !== null && SANE_ID.test(given) ? given : randomUUIDv7();
};

// Every answer carries the request's id, whatever answers it: a route, a refusal before routing,
// the error handler, MCP.
export const requestIds = () =>
  new Elysia({ name: 'request-id' }).onRequest(({ request, set }) => {
    const id = requestIdFrom(request);
    ids.set(request, id);
    set.headers[REQUEST_ID_HEADER] = id;
  });

// A W3C trace context (`traceparent`: version, trace id, the caller's span id, flags), as a host
// sends it in an HTTP header or, over MCP 2026-07-28, in a request's _meta: the ids a log line
// carries so that the host's trace finds it. Anything malformed is ignored, as the standard says.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;
export function traceFields(traceparent: unknown): { traceId?: string; parentSpanId?: string } {
  const [, version, traceId, parentSpanId] = (typeof traceparent === 'string' && TRACEPARENT.exec(traceparent.trim())) || [];
  if (!version || version === 'ff' || /^0+$/.test(traceId!) || /^0+$/.test(parentSpanId!)) return {};
  return { traceId, parentSpanId };
}

// The logger for one request: every line it writes names the request, and the caller's trace when
// it sent one.
export const requestLog = (log: Logger, request: Request): Logger =>
  withFields(log, { requestId: requestIdOf(request), ...traceFields(request.headers.get('traceparent')) });
