// Doorbells in flight per webhook endpoint (its URL), in this process. Without a cap, a handler
// that never answers would hold every worker slot for the 2-minute time-out and every other
// agent's doorbell would wait behind it. A doorbell over its endpoint's cap is parked (its job put
// back in the queue, due later) instead of holding a slot, and the endpoint's oldest parked
// doorbell is woken the moment one of its own slots frees.
export type EndpointSlots = {
  // True when a slot was taken; the caller must release it.
  take(endpoint: string): boolean;
  release(endpoint: string): void;
  // Remembers the job of a doorbell parked because its endpoint was full.
  parked(endpoint: string, jobId: string): void;
  // Takes the job id of the endpoint's oldest doorbell parked here, if any.
  nextParked(endpoint: string): string | undefined;
  inFlight(endpoint: string): number;
};

export function endpointSlots(cap: number): EndpointSlots {
  const inFlight = new Map<string, number>();
  const waiting = new Map<string, string[]>();
  return {
    take(endpoint) {
      const n = inFlight.get(endpoint) ?? 0;
      if (n >= cap) return false;
      inFlight.set(endpoint, n + 1);
      return true;
    },
    release(endpoint) {
      const n = (inFlight.get(endpoint) ?? 1) - 1;
      if (n > 0) inFlight.set(endpoint, n);
      else inFlight.delete(endpoint);
    },
    parked(endpoint, jobId) {
      const queue = waiting.get(endpoint);
      if (queue) queue.push(jobId);
      else waiting.set(endpoint, [jobId]);
    },
    nextParked(endpoint) {
      const queue = waiting.get(endpoint);
      const next = queue?.shift();
      if (queue?.length === 0) waiting.delete(endpoint);
      return next;
    },
    inFlight: (endpoint) => inFlight.get(endpoint) ?? 0,
  };
}
