import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { pinnedLookup, resolveOutboundAddresses, type WebhookUrlPolicy } from '../domain/agents/webhook-url';

// The most of an answer read: a client's metadata document is small (the draft suggests 5 KiB, as
// oidc-provider does); a larger answer is refused here, as soon as it passes the limit.
export const CLIENT_METADATA_BYTES = 5 * 1024;

// How long a failed fetch is remembered, and how many are: oidc-provider looks a refused client up
// a second time, to decide where its error may go, and a client's server that never answers would
// otherwise cost the person two waits of the library's 2.5 s. Long enough for that, short enough
// that a host that fixes its document is not kept waiting.
export const FAILURE_MEMORY_MS = 10_000;
const FAILURES_KEPT = 1_000;

type Failure = { until: number; error: Error } | { until: number; status: number };

// What the authorization server fetches (a client's metadata document, above all: its client_id is
// an https URL anyone can name) goes out under the webhooks' rules: public addresses only, resolved
// once and connected to exactly, GET only, no redirects, at most CLIENT_METADATA_BYTES.
// oidc-provider's own guard against private addresses needs Node's undici and is inert under Bun.
export function outboundFetch(policy: WebhookUrlPolicy) {
  const failures = new Map<string, Failure>();
  const failedRecently = (address: string) => {
    const failure = failures.get(address);
    if (failure && failure.until > Date.now()) return failure;
    failures.delete(address);
    return null;
  };
  const remember = (address: string, failure: Failure) => {
    failures.delete(address);
    failures.set(address, failure);
    // The oldest first: a Map keeps insertion order.
    for (const [oldest] of failures) {
      if (failures.size <= FAILURES_KEPT) break;
      failures.delete(oldest);
    }
  };
  const fetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const address = input instanceof Request ? input.url : String(input);
    const known = failedRecently(address);
    if (known) {
      if ('error' in known) throw known.error;
      return new Response(null, { status: known.status });
    }
    try {
      if ((init.method ?? 'GET') !== 'GET') throw new Error(`only GET is sent, not ${init.method}`);
      const { url, addresses } = await resolveOutboundAddresses(address, policy, 'the client metadata address');
      const response = await getPinned(url, addresses[0]!, new Headers(init.headers), init.signal ?? undefined);
      if (response.status !== 200) remember(address, { until: Date.now() + FAILURE_MEMORY_MS, status: response.status });
      return response;
    } catch (error) {
      remember(address, { until: Date.now() + FAILURE_MEMORY_MS, error: error as Error });
      throw error;
    }
  };
  // A fetch that would only repeat a recent failure does no work, so it need not count against the
  // per-address limit.
  return { fetch, failedRecently: (address: string) => failedRecently(address) !== null };
}

function getPinned(url: URL, pinned: { address: string; family: number }, headers: Headers, signal?: AbortSignal): Promise<Response> {
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', lookup: pinnedLookup(pinned), agent: false, headers: Object.fromEntries(headers) }, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let finished = false;
      const done = () => {
        if (finished) return;
        finished = true;
        res.destroy();
        if (size > CLIENT_METADATA_BYTES) return reject(new Error(`the answer is larger than ${CLIENT_METADATA_BYTES} bytes`));
        const kept = new Headers();
        for (const [name, value] of Object.entries(res.headers)) if (typeof value === 'string') kept.set(name, value);
        resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 502, headers: kept }));
      };
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        if (size > CLIENT_METADATA_BYTES) done();
      });
      res.on('end', done);
      res.on('error', reject);
    });
    const abort = () => req.destroy(new Error('no answer in time (timed out)'));
    if (signal?.aborted) abort();
    else signal?.addEventListener('abort', abort, { once: true });
    req.on('error', reject);
    req.end();
  });
}
