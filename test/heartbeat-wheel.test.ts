import { expect, test } from 'bun:test';
import { heartbeatWheel } from '../src/web/event-stream';

// Ten thousand streams' keep-alives sent in one go held the event loop for 100 to 240 ms: the
// wheel beats a share of them at each turn, and each of them once a revolution.
test('each stream beats once a revolution, and a turn beats only its slot’s share', () => {
  const wheel = heartbeatWheel(10);
  const beats = new Map<number, number>();
  const takeOff = Array.from({ length: 35 }, (_, i) => wheel.add(() => beats.set(i, (beats.get(i) ?? 0) + 1)));
  const perTurn: number[] = [];
  for (let turn = 0; turn < 10; turn++) {
    const before = [...beats.values()].reduce((a, b) => a + b, 0);
    wheel.turn();
    perTurn.push([...beats.values()].reduce((a, b) => a + b, 0) - before);
  }
  expect(perTurn).toEqual([4, 4, 4, 4, 4, 3, 3, 3, 3, 3]);
  expect([...beats.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 35 }, (_, i) => i));
  expect(new Set(beats.values())).toEqual(new Set([1]));

  // Taken off, a stream beats no more; taking it off twice counts once.
  expect(takeOff[0]!()).toBe(34);
  expect(takeOff[0]!()).toBe(34);
  beats.clear();
  for (let turn = 0; turn < 10; turn++) wheel.turn();
  expect(beats.size).toBe(34);
  expect(beats.has(0)).toBe(false);
  expect(takeOff.slice(1).map((off) => off()).at(-1)).toBe(0);
});
