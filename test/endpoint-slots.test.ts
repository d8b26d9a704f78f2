import { describe, expect, test } from 'bun:test';
import { endpointSlots, SLOW_MS } from '../src/webhooks/endpoint-slots';

// The per-endpoint cap in isolation: small for an endpoint not yet heard from or slow, larger for
// one that answers quickly (its extra slots from a shared reserve), and a quick endpoint's next
// slot handed to a doorbell waiting for it.
const url = 'https://hooks.example.com/a';
const takeAll = (slots: ReturnType<typeof endpointSlots>, n: number, at = url) =>
  Array.from({ length: n }, () => slots.take(at)).filter((r) => r !== null) as (() => void)[];
// An endpoint that has answered one doorbell quickly.
const quick = (slots: ReturnType<typeof endpointSlots>, at = url) => slots.take(at)!();

describe('endpoint slots', () => {
  test('an endpoint is its URL: another path is another endpoint', () => {
    const slots = endpointSlots({ slowCap: 1, fastCap: 8, reserve: 8 });
    expect(takeAll(slots, 3, 'https://hooks.example.com/a')).toHaveLength(1);
    expect(takeAll(slots, 3, 'https://hooks.example.com/b')).toHaveLength(1);
  });

  test('an endpoint not yet heard from gets the small cap', () => {
    const slots = endpointSlots({ slowCap: 4, fastCap: 16, reserve: 16 });
    expect(takeAll(slots, 10)).toHaveLength(4);
    expect(slots.take('https://other.example.com/')).not.toBeNull();
  });

  test('one that answered quickly gets the larger cap, until a doorbell stays in flight past SLOW_MS', async () => {
    const slots = endpointSlots({ slowCap: 4, fastCap: 16, reserve: 16 });
    quick(slots);
    const busy = slots.take(url)!;
    expect(takeAll(slots, 20)).toHaveLength(15);
    await Bun.sleep(SLOW_MS + 50);
    // `busy` has now been in flight for over a second: the endpoint counts as slow again.
    expect(slots.take(url)).toBeNull();
    busy();
  });

  test('the slots beyond the small cap come from one reserve shared by every quick endpoint', () => {
    const slots = endpointSlots({ slowCap: 2, fastCap: 10, reserve: 6 });
    const a = 'https://a.example.com/';
    const b = 'https://b.example.com/';
    quick(slots, a);
    quick(slots, b);
    expect(takeAll(slots, 10, a)).toHaveLength(8);
    // a took 2 of its own and 6 from the reserve: b still has its own 2, and nothing more.
    expect(takeAll(slots, 10, b)).toHaveLength(2);
  });

  test('one whose last answer took longer than SLOW_MS keeps the small cap', async () => {
    const slots = endpointSlots({ slowCap: 2, fastCap: 16, reserve: 16 });
    const slow = slots.take(url)!;
    const keep = slots.take(url)!;
    await Bun.sleep(SLOW_MS + 50);
    slow();
    expect(takeAll(slots, 5)).toHaveLength(1);
    keep();
  });

  test('over the cap of a quick endpoint, a doorbell waits for the next free slot, handed over directly', async () => {
    const slots = endpointSlots({ slowCap: 1, fastCap: 2, reserve: 2 });
    quick(slots);
    const held = takeAll(slots, 2);
    expect(held).toHaveLength(2);
    const waiting = slots.waitForSlot(url, 1_000);
    held[0]!();
    expect(await waiting).not.toBeNull();
    // The freed slot went to the waiter: the endpoint is still full.
    expect(slots.take(url)).toBeNull();
    expect(await slots.waitForSlot(url, 20)).toBeNull();
  });

  test('a slow or unknown endpoint is never waited for: its doorbell is parked at once', async () => {
    const slots = endpointSlots({ slowCap: 1, fastCap: 2, reserve: 2 });
    const held = slots.take(url)!;
    const started = performance.now();
    expect(await slots.waitForSlot(url, 1_000)).toBeNull();
    expect(performance.now() - started).toBeLessThan(100);
    held();
    expect(slots.free(url)).toBe(1);
  });
});
