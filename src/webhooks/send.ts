import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { DomainError } from '../domain/shared/errors';
import { pinnedLookup, resolveOutboundAddresses, type WebhookUrlPolicy } from '../domain/agents/webhook-url';
import type { AttemptOutcome } from '../domain/deliveries/retry-policy';
import { SIGNATURE_HEADER } from '../domain/deliveries/doorbell-signature';

// `headers` comes from doorbellHeaders (sign.ts): every header but Content-Length.
export type Doorbell = { url: string; body: string; headers: Record<string, string> };

// What the attempt log keeps of an answer, and how long the sender waits for it after the status.
export const RESPONSE_BODY_BYTES = 1024;
// And of its headers: this many, each value cut to RESPONSE_HEADER_CHARS (a handler chooses them).
export const RESPONSE_HEADERS_KEPT = 32;
const RESPONSE_HEADER_CHARS = 256;
const BODY_GRACE_MS = 1_000;
export type SendOptions = { policy: WebhookUrlPolicy; timeoutMs: number; signal?: AbortSignal };

// A connection that answered a doorbell in full is kept for the next doorbell to the same URL
// origin at the same checked address: a new connection for each cost the worker and the handler
// more CPU than the rest of the request (a loopback benchmark: 602 µs a request against 268 µs).
// An idle one is closed after KEEP_ALIVE_IDLE_MS, before the usual server time-outs (Node's 5 s),
// and at most MAX_IDLE_PER_TARGET wait per target; targets beyond MAX_TARGETS are forgotten oldest
// first. A connection is never shared between two host names, even at one address, so that a
// TLS connection is only reused for the name its certificate was checked against.
const KEEP_ALIVE_IDLE_MS = 2_000;
const MAX_IDLE_PER_TARGET = 8;
const MAX_TARGETS = 512;
const agents = new Map<string, HttpAgent>();

function agentFor(url: URL, address: string): HttpAgent {
  const key = `${url.protocol}//${url.host}@${address}`;
  const known = agents.get(key);
  if (known) {
    agents.delete(key);
    agents.set(key, known);
    return known;
  }
  const options = { keepAlive: true, maxFreeSockets: MAX_IDLE_PER_TARGET, timeout: KEEP_ALIVE_IDLE_MS };
  const agent = url.protocol === 'https:' ? new HttpsAgent(options) : new HttpAgent(options);
  agents.set(key, agent);
  if (agents.size > MAX_TARGETS) {
    const [oldestKey, oldest] = agents.entries().next().value!;
    agents.delete(oldestKey);
    // Only its idle connections: one carrying a doorbell finishes it, then times out idle.
    for (const idle of Object.values(oldest.freeSockets)) idle?.forEach((socket) => socket.destroy());
  }
  return agent;
}

// A kept connection the handler closed just as a doorbell went out on it fails before any answer;
// that doorbell is sent once more on a new connection (with a time-out of its own) instead of
// counting as a failed attempt. The handler may have read the first one before closing: a
// doorbell may arrive twice, as the contract allows.
const RESENDABLE = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

// One POST of a doorbell. The URL is checked again against freshly resolved addresses, and the
// connection goes to exactly the address that passed (no second lookup that a rebinding name
// could answer differently); TLS still verifies the certificate for the URL's host name.
// Redirects are not followed: a 3xx is a non-2xx answer like any other.
export async function sendDoorbell(doorbell: Doorbell, options: SendOptions): Promise<AttemptOutcome> {
  let target: Awaited<ReturnType<typeof resolveOutboundAddresses>>;
  try {
    target = await resolveOutboundAddresses(doorbell.url, options.policy);
  } catch (error) {
    if (error instanceof DomainError) return { status: null, error: `refused to send: ${error.message.replace(/\.$/, '')}` };
    throw error;
  }
  const { address, family } = target.addresses[0]!;
  return postPinned(target.url, { address, family }, doorbell, options);
}

export function postPinned(
  url: URL,
  pinned: { address: string; family: number },
  doorbell: Doorbell,
  options: Pick<SendOptions, 'timeoutMs' | 'signal'>,
  reuse = true,
): Promise<AttemptOutcome> {
  const { timeoutMs, signal } = options;
  const lookup = pinnedLookup(pinned);
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  const body = Buffer.from(doorbell.body);
  const headers = { ...doorbell.headers, 'Content-Length': String(body.length) };
  const sent = loggedHeaders(headers);
  return new Promise((resolve) => {
    let settled = false;
    let responded = false;
    // Once the status is in, how to finish with it and whatever of the body has come.
    let answered: (() => void) | null = null;
    const finish = (outcome: AttemptOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve({ ...outcome, requestHeaders: sent });
    };
    const req = request(
      url,
      {
        method: 'POST',
        lookup,
        agent: reuse ? agentFor(url, pinned.address) : false,
        headers,
      },
      // The status decides; the first KiB of the body is kept for the attempt log, read for at most
      // BODY_GRACE_MS, and the rest is never read. Only an answer read to its end leaves its
      // connection for the next doorbell: one cut short (a handler that streams, or sends its
      // headers and then works) is closed, so a handler cannot hold the socket open.
      (res: IncomingMessage) => {
        clearTimeout(timer);
        responded = true;
        const status = res.statusCode ?? null;
        const chunks: Buffer[] = [];
        let size = 0;
        const done = (complete: boolean) => {
          // Once only: a socket handed back after the end must not be closed by a late event.
          if (settled) return;
          clearTimeout(grace);
          const text = Buffer.concat(chunks).subarray(0, RESPONSE_BODY_BYTES).toString('utf8');
          finish({ status, error: null, responseBody: storable(text), responseHeaders: keptHeaders(res.rawHeaders) });
          if (!complete) res.destroy();
        };
        const grace = setTimeout(() => done(false), BODY_GRACE_MS);
        answered = () => done(false);
        res.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          size += chunk.length;
          if (size >= RESPONSE_BODY_BYTES) done(false);
        });
        res.on('end', () => done(true));
        res.on('error', () => done(false));
      },
    );
    const timer = setTimeout(() => {
      finish({ status: null, error: `no answer within ${timeoutMs} ms (timed out)` });
      req.destroy();
    }, timeoutMs);
    // A shutdown cancels a request still waiting for its answer; one answered already keeps it.
    const onAbort = () => {
      if (answered) return answered();
      finish({ status: null, error: 'cancelled: the worker is shutting down' });
      req.destroy();
    };
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (!settled && !responded && req.reusedSocket && RESENDABLE.has(error.code ?? '') && !signal?.aborted) {
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(postPinned(url, pinned, doorbell, options, false));
        return;
      }
      finish({ status: null, error: connectionError(error) });
    });
    req.end(body);
  });
}

// PostgreSQL text cannot hold NUL.
const storable = (text: string) => text.replaceAll('\u0000', '\uFFFD');

// The handler's headers as the attempt log keeps them (names in lower case, repeated ones joined).
function keptHeaders(raw: string[]): Record<string, string> {
  const kept: Record<string, string> = {};
  for (let i = 0; i + 1 < raw.length && Object.keys(kept).length < RESPONSE_HEADERS_KEPT; i += 2) {
    const name = storable(raw[i]!.toLowerCase());
    const value = storable(raw[i + 1]!).slice(0, RESPONSE_HEADER_CHARS);
    kept[name] = name in kept ? `${kept[name]}, ${value}` : value;
  }
  return kept;
}

// The headers as the attempt log keeps them: signatures are derived from the secret, so only
// their presence is recorded.
const SIGNATURE_HEADERS = new Set([SIGNATURE_HEADER.toLowerCase(), 'webhook-signature']);
export function loggedHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, SIGNATURE_HEADERS.has(name.toLowerCase()) ? '(signature)' : value]));
}

function connectionError(error: NodeJS.ErrnoException): string {
  const code = error.code ? ` (${error.code})` : '';
  return `connection failed${code}: ${error.message.replace(/\.$/, '')}`;
}
