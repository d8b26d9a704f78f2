// Doorbells in flight per webhook endpoint (its URL), in this process. Without a cap, a handler that never answers would hold every worker slot for the
// 2-minute time-out and every other agent's doorbell would wait behind it. A doorbell over its
// endpoint's cap is parked (its job put back in the queue, due later; see notify-task.ts) instead
// of holding a slot.
//
// Every endpoint may hold `slowCap` slots. One whose last doorbell was answered within SLOW_MS,
// with none in flight for longer than that, may hold up to `fastCap`, its slots beyond `slowCap`
// drawn from one reserve of `reserve` shared by all endpoints: a burst to a healthy handler is not
// throttled, and endpoints that were quick and then hang can together hold no more than the
// reserve beyond their small caps. A doorbell over the cap of a quick endpoint may wait a moment
// for that endpoint's next free slot, handed over directly, rather than pay for parking.
export const SLOW_MS = 1_000;

export type Release = () => void;

export type EndpointSlots = {
  // A slot, or null when the endpoint is at its cap; call the answer to free the slot.
  take(url: string): Release | null;
  // For an endpoint that answers quickly, waits up to `ms` for its next free slot; null at once
  // for one that is slow or not yet heard from, or when `ms` passes first.
  waitForSlot(url: string, ms: number): Promise<Release | null>;
  // How many more doorbells the endpoint could take now.
  free(url: string): number;
};

// The key the caps go by: the registered URL. Keying by host instead would not stop anyone who
// wants more slots (host names are as cheap as paths) and would throttle unrelated agents behind
// one shared handler host; what bounds the damage is the small cap plus the shared reserve.
export const endpointOf = (url: string) => url;

type Slot = { at: number; extra: boolean };
type Endpoint = { started: Set<Slot>; waiting: ((release: Release) => void)[] };

// How long each endpoint's last doorbell took, for this many endpoints, least recently used out.
const REMEMBERED_ENDPOINTS = 10_000;

export function endpointSlots({ slowCap, fastCap, reserve }: { slowCap: number; fastCap: number; reserve: number }): EndpointSlots {
  const endpoints = new Map<string, Endpoint>();
  const lastMs = new Map<string, number>();
  let extrasInUse = 0;
  const remember = (key: string, ms: number) => {
    lastMs.delete(key);
    lastMs.set(key, ms);
    if (lastMs.size > REMEMBERED_ENDPOINTS) lastMs.delete(lastMs.keys().next().value!);
  };
  const get = (key: string) => {
    let endpoint = endpoints.get(key);
    if (!endpoint) endpoints.set(key, (endpoint = { started: new Set(), waiting: [] }));
    return endpoint;
  };
  // An endpoint with nothing in flight or waiting is dropped, so that the map stays as small as the
  // set of busy endpoints; how long its last doorbell took is remembered apart.
  const forgetIfIdle = (key: string, endpoint: Endpoint) => {
    if (endpoint.started.size === 0 && endpoint.waiting.length === 0) endpoints.delete(key);
  };
  const quick = (key: string, endpoint: Endpoint) => {
    const last = lastMs.get(key);
    if (last === undefined || last >= SLOW_MS) return false;
    const now = performance.now();
    for (const slot of endpoint.started) if (now - slot.at >= SLOW_MS) return false;
    return true;
  };
  // Whether one more slot may be granted now, and whether it would come from the reserve.
  const room = (key: string, endpoint: Endpoint): { extra: boolean } | null => {
    if (endpoint.started.size < slowCap) return { extra: false };
    if (endpoint.started.size < fastCap && extrasInUse < reserve && quick(key, endpoint)) return { extra: true };
    return null;
  };
  const grant = (key: string, endpoint: Endpoint, extra: boolean): Release => {
    const slot = { at: performance.now(), extra };
    endpoint.started.add(slot);
    if (extra) extrasInUse++;
    return () => {
      if (!endpoint.started.delete(slot)) return;
      if (slot.extra) extrasInUse--;
      remember(key, performance.now() - slot.at);
      const next = endpoint.waiting[0] && room(key, endpoint);
      if (next) endpoint.waiting.shift()!(grant(key, endpoint, next.extra));
      else forgetIfIdle(key, endpoint);
    };
  };
  return {
    take(url) {
      const key = endpointOf(url);
      const endpoint = get(key);
      const granted = room(key, endpoint);
      if (granted) return grant(key, endpoint, granted.extra);
      forgetIfIdle(key, endpoint);
      return null;
    },
    waitForSlot(url, ms) {
      const key = endpointOf(url);
      const endpoint = get(key);
      // At most as many waiting as may be in flight: the rest of the worker slots stay free.
      if (!quick(key, endpoint) || endpoint.waiting.length >= fastCap) {
        forgetIfIdle(key, endpoint);
        return Promise.resolve(null);
      }
      return new Promise((resolve) => {
        const waiter = (release: Release) => {
          clearTimeout(timer);
          resolve(release);
        };
        const timer = setTimeout(() => {
          endpoint.waiting.splice(endpoint.waiting.indexOf(waiter), 1);
          forgetIfIdle(key, endpoint);
          resolve(null);
        }, ms);
        endpoint.waiting.push(waiter);
      });
    },
    free(url) {
      const key = endpointOf(url);
      const endpoint = endpoints.get(key);
      if (!endpoint) return slowCap;
      const slow = Math.max(0, slowCap - endpoint.started.size);
      const extra = quick(key, endpoint) ? Math.min(Math.max(0, fastCap - Math.max(slowCap, endpoint.started.size)), reserve - extrasInUse) : 0;
      return Math.max(0, slow + extra - endpoint.waiting.length);
    },
  };
}
