import { Elysia } from 'elysia';
import { BEFORE_ROUTING, countEarlyAnswer } from './metrics';
import { invalid } from '../domain/shared/errors';
import { refusalFor } from './envelope';

// The body limit of the server that received each request, for the body reader below.
const limits = new WeakMap<Request, number>();

export class BodyTooLarge extends Error {
  constructor(readonly maxBytes: number) {
    super(`The request body is larger than the limit of ${maxBytes} bytes.`);
  }
}

// Request bodies are JSON whatever the Content-Type says (curl -d sends form encoding by default),
// and an empty body is no body, so that bodiless POSTs work with any client. Reading stops as soon
// as the body passes the limit, so a chunked body without a declared length is never buffered whole.
export async function readJsonBody(request: Request): Promise<unknown> {
  const text = await readTextBody(request);
  if (text.trim() === '') return null;
  try {
    return JSON.parse(text);
  } catch {
    throw invalid('The request body is not valid JSON.');
  }
}

// The body as text, cut off at the limit like any other.
export const readTextBody = (request: Request) => readCapped(request, limits.get(request) ?? Number.POSITIVE_INFINITY);

async function readCapped(request: Request, maxBytes: number): Promise<string> {
  if (!request.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > maxBytes) throw new BodyTooLarge(maxBytes);
    chunks.push(chunk);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

const declaredOver = (request: Request, maxBytes: number) => Number(request.headers.get('content-length') ?? 0) > maxBytes;

// Refuses an oversized body from its declared length, before anything reads it; a body sent
// without a length is cut off by readJsonBody at the same figure. POSTs to `streamed` paths (file
// uploads) are left to their route, which streams the body under a bound of its own.
export const bodyLimit = (maxBytes: number, streamed: string[] = []) =>
  new Elysia({ name: 'body-limit' }).onRequest(({ request, set }) => {
    if (request.method === 'POST' && streamed.includes(new URL(request.url).pathname)) return;
    limits.set(request, maxBytes);
    if (declaredOver(request, maxBytes)) {
      set.status = 413;
      countEarlyAnswer(request, BEFORE_ROUTING, 413);
      return refusalFor(request, { sentence: new BodyTooLarge(maxBytes).message, code: 'too_large' });
    }
  });

// The same limit, lowered for one request by a route that never needs more than a few KiB, so that
// it refuses a larger body before parsing it (and, on an open route, before any rate limit counts
// it). Call it before readJsonBody.
export function lowerBodyLimit(request: Request, maxBytes: number) {
  const limit = Math.min(limits.get(request) ?? Number.POSITIVE_INFINITY, maxBytes);
  limits.set(request, limit);
  if (declaredOver(request, limit)) throw new BodyTooLarge(limit);
}

// One member of a parsed JSON body, whatever the body turned out to be: a route that reads a
// field or two leaves the refusal of a wrong value to the domain.
export const bodyField = (body: unknown, name: string) =>
  body && typeof body === 'object' ? (body as Record<string, unknown>)[name] : undefined;
