// Doorbells in flight per webhook endpoint (its URL), in this process. Without a cap, a handler
// that never answers would hold every worker slot for the 2-minute time-out and every other
// agent's doorbell would wait behind it. A doorbell over its endpoint's cap is parked (its job put
// back in the queue, due later) instead of holding a slot, and the endpoint's oldest parked
// doorbell is woken the moment one of its own slots frees.
//
// The cap adapts: an endpoint whose last doorbell was answered within SLOW_MS, with none in
// flight for longer than that, may hold `fastCap` slots, so that a burst to a healthy handler is
// not throttled; an endpoint not yet heard from, or slow, holds at most `slowCap`.
export const SLOW_MS = 1_000;

export type EndpointSlots = {
  // A slot, or null when the endpoint is at its cap; call the answer to free the slot.
  take(endpoint: string): (() => void) | null;
  // Remembers the job of a doorbell parked because its endpoint was full.
  parked(endpoint: string, jobId: string): void;
  // Takes the job id of the endpoint's oldest doorbell parked here, if any.
  nextParked(endpoint: string): string | undefined;
  hasFree(endpoint: string): boolean;
};

type Endpoint = { started: Set<{ at: number }>; lastMs: number | null; parked: string[] };

export function endpointSlots({ slowCap, fastCap }: { slowCap: number; fastCap: number }): EndpointSlots {
  const endpoints = new Map<string, Endpoint>();
  const get = (url: string) => {
    let endpoint = endpoints.get(url);
    if (!endpoint) endpoints.set(url, (endpoint = { started: new Set(), lastMs: null, parked: [] }));
    return endpoint;
  };
  // An endpoint with nothing in flight and nothing parked is forgotten, so that the map stays as
  // small as the set of busy endpoints; it starts again as not yet heard from.
  const forgetIfIdle = (url: string, endpoint: Endpoint) => {
    if (endpoint.started.size === 0 && endpoint.parked.length === 0) endpoints.delete(url);
  };
  const cap = (endpoint: Endpoint, now: number) => {
    if (endpoint.lastMs === null || endpoint.lastMs >= SLOW_MS) return slowCap;
    for (const slot of endpoint.started) if (now - slot.at >= SLOW_MS) return slowCap;
    return Math.max(slowCap, fastCap);
  };
  return {
    take(url) {
      const endpoint = get(url);
      const now = performance.now();
      if (endpoint.started.size >= cap(endpoint, now)) return null;
      const slot = { at: now };
      endpoint.started.add(slot);
      return () => {
        if (!endpoint.started.delete(slot)) return;
        endpoint.lastMs = performance.now() - slot.at;
        forgetIfIdle(url, endpoint);
      };
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
      return !endpoint || endpoint.started.size < cap(endpoint, performance.now());
    },
  };
}
