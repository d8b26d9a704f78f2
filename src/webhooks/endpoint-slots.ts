// Doorbells in flight per webhook endpoint (its URL), in this process. Without a cap, a handler
// that never answers would hold every worker slot for the 2-minute time-out and every other
// agent's doorbell would wait behind it. A doorbell over its endpoint's cap is parked (its job put
// back in the queue, due later) instead of holding a slot, and the endpoint's oldest parked
// doorbell is woken the moment one of its own slots frees.
//
// The cap adapts: an endpoint whose last doorbell was answered within SLOW_MS, with none in
// flight for longer than that, may hold `fastCap` slots, so that a burst to a healthy handler is
// not throttled; an endpoint not yet heard from, or slow, holds at most `slowCap`. A doorbell over
// the cap of a quick endpoint may wait a moment for that endpoint's next free slot, handed over
// directly, rather than pay for parking and waking: such a slot frees within milliseconds.
export const SLOW_MS = 1_000;

export type EndpointSlots = {
  // A slot, or null when the endpoint is at its cap; call the answer to free the slot.
  take(endpoint: string): (() => void) | null;
  // For an endpoint that answers quickly, waits up to `ms` for its next free slot; null at once
  // for one that is slow or not yet heard from, or when `ms` passes first.
  waitForSlot(endpoint: string, ms: number): Promise<(() => void) | null>;
  // Remembers the job of a doorbell parked because its endpoint was full.
  parked(endpoint: string, jobId: string): void;
  // Takes the job id of the endpoint's oldest doorbell parked here, if any.
  nextParked(endpoint: string): string | undefined;
  hasFree(endpoint: string): boolean;
};

type Release = () => void;
type Endpoint = { started: Set<{ at: number }>; parked: string[]; waiting: ((release: Release) => void)[] };

// How long each endpoint's last doorbell took, for this many endpoints, least recently used out.
const REMEMBERED_ENDPOINTS = 10_000;

export function endpointSlots({ slowCap, fastCap }: { slowCap: number; fastCap: number }): EndpointSlots {
  const endpoints = new Map<string, Endpoint>();
  const lastMs = new Map<string, number>();
  const remember = (url: string, ms: number) => {
    lastMs.delete(url);
    lastMs.set(url, ms);
    if (lastMs.size > REMEMBERED_ENDPOINTS) lastMs.delete(lastMs.keys().next().value!);
  };
  const get = (url: string) => {
    let endpoint = endpoints.get(url);
    if (!endpoint) endpoints.set(url, (endpoint = { started: new Set(), parked: [], waiting: [] }));
    return endpoint;
  };
  // An endpoint with nothing in flight, parked or waiting is dropped, so that the map stays as
  // small as the set of busy endpoints; how long its last doorbell took is remembered apart.
  const forgetIfIdle = (url: string, endpoint: Endpoint) => {
    if (endpoint.started.size === 0 && endpoint.parked.length === 0 && endpoint.waiting.length === 0) endpoints.delete(url);
  };
  const quick = (url: string, endpoint: Endpoint, now: number) => {
    const last = lastMs.get(url);
    if (last === undefined || last >= SLOW_MS) return false;
    for (const slot of endpoint.started) if (now - slot.at >= SLOW_MS) return false;
    return true;
  };
  const cap = (url: string, endpoint: Endpoint, now: number) => (quick(url, endpoint, now) ? Math.max(slowCap, fastCap) : slowCap);
  const grant = (url: string, endpoint: Endpoint): Release => {
    const slot = { at: performance.now() };
    endpoint.started.add(slot);
    return () => {
      if (!endpoint.started.delete(slot)) return;
      remember(url, performance.now() - slot.at);
      const next = endpoint.waiting.shift();
      if (next) next(grant(url, endpoint));
      else forgetIfIdle(url, endpoint);
    };
  };
  return {
    take(url) {
      const endpoint = get(url);
      if (endpoint.started.size >= cap(url, endpoint, performance.now())) return null;
      return grant(url, endpoint);
    },
    waitForSlot(url, ms) {
      const endpoint = get(url);
      // At most as many waiting as may be in flight: the rest of the worker slots stay free.
      if (!quick(url, endpoint, performance.now()) || endpoint.waiting.length >= fastCap) {
        forgetIfIdle(url, endpoint);
        return Promise.resolve(null);
      }
      return new Promise((resolve) => {
        const waiter = (release: Release) => {
          clearTimeout(timer);
          resolve(release);
        };
        const timer = setTimeout(() => {
          endpoint.waiting.splice(endpoint.waiting.indexOf(waiter), 1);
          forgetIfIdle(url, endpoint);
          resolve(null);
        }, ms);
        endpoint.waiting.push(waiter);
      });
    },
    parked(url, jobId) {
      get(url).parked.push(jobId);
    },
    nextParked(url) {
      const endpoint = endpoints.get(url);
      if (!endpoint) return undefined;
      const next = endpoint.parked.shift();
      forgetIfIdle(url, endpoint);
      return next;
    },
    hasFree(url) {
      const endpoint = endpoints.get(url);
      return !endpoint || endpoint.started.size < cap(url, endpoint, performance.now());
    },
  };
}
