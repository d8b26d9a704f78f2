import { describe, expect, test } from 'bun:test';
import { endpointSlots, SLOW_MS } from '../src/webhooks/endpoint-slots';

// The per-endpoint cap in isolation: small for an endpoint not yet heard from or slow, larger for
// one that answers quickly, and parked doorbells handed back oldest first.
const url = 'https://hooks.example.com/a';
const takeAll = (slots: ReturnType<typeof endpointSlots>, n: number) =>
  Array.from({ length: n }, () => slots.take(url)).filter((r) => r !== null) as (() => void)[];

describe('endpoint slots', () => {
  test('an endpoint not yet heard from gets the small cap', () => {
    const slots = endpointSlots({ slowCap: 4, fastCap: 16 });
    expect(takeAll(slots, 10)).toHaveLength(4);
    expect(slots.hasFree(url)).toBe(false);
    expect(slots.take('https://hooks.example.com/other')).not.toBeNull();
  });

  test('one that answered quickly gets the larger cap, until a doorbell stays in flight past SLOW_MS', async () => {
    const slots = endpointSlots({ slowCap: 4, fastCap: 16 });
    const first = slots.take(url)!;
    const busy = slots.take(url)!;
    first();
    expect(takeAll(slots, 20)).toHaveLength(15);
    await Bun.sleep(SLOW_MS + 50);
    // `busy` has now been in flight for over a second: the endpoint counts as slow again.
    expect(slots.take(url)).toBeNull();
    busy();
  });

  test('one whose last answer took longer than SLOW_MS keeps the small cap', async () => {
    const slots = endpointSlots({ slowCap: 2, fastCap: 16 });
    const slow = slots.take(url)!;
    const keep = slots.take(url)!;
    await Bun.sleep(SLOW_MS + 50);
    slow();
    expect(takeAll(slots, 5)).toHaveLength(1);
    keep();
  });

  test('parked doorbells come back oldest first, and an idle endpoint is forgotten', () => {
    const slots = endpointSlots({ slowCap: 1, fastCap: 1 });
    const release = slots.take(url)!;
    slots.parked(url, '1');
    slots.parked(url, '2');
    expect(slots.nextParked(url)).toBe('1');
    expect(slots.nextParked(url)).toBe('2');
    expect(slots.nextParked(url)).toBeUndefined();
    release();
    expect(slots.hasFree(url)).toBe(true);
  });

  test('over the cap of a quick endpoint, a doorbell waits for the next free slot, handed over directly', async () => {
    const slots = endpointSlots({ slowCap: 1, fastCap: 2 });
    slots.take(url)!();
    const held = takeAll(slots, 2);
    expect(held).toHaveLength(2);
    const waiting = slots.waitForSlot(url, 1_000);
    held[0]!();
    const handed = await waiting;
    expect(handed).not.toBeNull();
    // The freed slot went to the waiter: the endpoint is still full.
    expect(slots.take(url)).toBeNull();
    expect(await slots.waitForSlot(url, 20)).toBeNull();
  });

  test('a slow or unknown endpoint is never waited for: its doorbell is parked at once', async () => {
    const slots = endpointSlots({ slowCap: 1, fastCap: 2 });
    const held = slots.take(url)!;
    const started = performance.now();
    expect(await slots.waitForSlot(url, 1_000)).toBeNull();
    expect(performance.now() - started).toBeLessThan(100);
    held();
  });
});
