import { describe, expect, test } from 'bun:test';
import { heapPacer, heapPacing } from '../src/heap-pacing';
import { eventually } from './support/receiver';

const MB = 1_048_576;
// Each size in turn, as the pacer reads them; the indexes at which it asks for a full collection
// (which, asked, is taken to leave `left` MB).
function run(afterFullMb: number, sizesMb: number[], left?: number) {
  const pacer = heapPacer(afterFullMb * MB);
  const asked: number[] = [];
  sizesMb.forEach((size, i) => {
    if (!pacer.observe(size * MB)) return;
    asked.push(i);
    if (left !== undefined) pacer.collected(left * MB);
  });
  return asked;
}

describe('heap pacing, the decision', () => {
  test('an idle heap, or one only growing, is never collected', () => {
    expect(run(17, Array(50).fill(17))).toEqual([]);
    expect(run(17, Array.from({ length: 50 }, (_, i) => 17 + i * 4))).toEqual([]);
  });

  test('collects once the last two young collections both left more than 12 MB over the last full one', () => {
    // Each young collection leaves 2 MB more than the one before: 19, 21, …; 31 is past 17 + 12,
    // and it is the smaller of the last two at 33.
    const sizes = [17, 40, 19, 45, 21, 46, 23, 47, 25, 48, 27, 49, 29, 50, 31, 52, 33, 53];
    expect(run(17, sizes, 18)).toEqual([16]);
    // Exactly 12 MB over is not yet past it.
    expect(run(17, [40, 29, 45, 29], 18)).toEqual([]);
  });

  test('one reading taken long after a young collection does not start a full one', () => {
    // 35 was read well into the next cycle; the young collections around it left 20 and 22.
    expect(run(17, [40, 20, 45, 35, 50, 22, 50, 23], 18)).toEqual([]);
  });

  test('after a full collection it counts from what that one left', () => {
    // Asked at index 5, which leaves 18: the next ask needs the last two above 30.
    const sizes = [40, 25, 45, 31, 50, 32, 60, 29, 52, 30, 55, 31, 56, 32];
    expect(run(17, sizes, 18)).toEqual([5, 13]);
  });

  test('a large live heap is collected after half of it again, not after 12 MB', () => {
    // 100 MB live: 20 MB over is not enough, more than 50 is.
    expect(run(100, [130, 112, 140, 130, 170, 149, 180, 150], 100)).toEqual([]);
    expect(run(100, [130, 120, 170, 151, 180, 152], 100)).toEqual([5]);
  });

  test("a full collection of JavaScriptCore's own that leaves less is the new baseline", () => {
    // Its own full collection leaves 10: 23 and 24 are then more than 12 over it.
    expect(run(17, [40, 10, 30, 23, 35, 24], 18)).toEqual([5]);
  });
});

describe('heap pacing, the timer', () => {
  // A heap read from a list, then at its last size; each collection leaves `left`.
  function heap(sizesMb: number[], leftMb: number) {
    const queue = [...sizesMb];
    let last = queue[0]!;
    const state = { reads: 0, collections: 0 };
    return {
      state,
      access: {
        read: () => {
          state.reads++;
          last = queue.shift() ?? last;
          return last * MB;
        },
        collect: () => {
          state.collections++;
          queue.unshift(leftMb);
        },
        everyMs: 2,
      },
    };
  }
  test('collects when the heap says so, once, and reads on while any service runs', async () => {
    const { state, access } = heap([17, 40, 20, 45, 31, 50, 33], 18);
    const pacing = heapPacing(access);
    const first = pacing.start();
    const second = pacing.start();
    await eventually(async () => state.collections === 1 && state.reads > 20);

    // One service stops, twice: the other still has the timer.
    first.stop();
    first.stop();
    const readsThen = state.reads;
    await eventually(async () => state.reads > readsThen + 5);

    second.stop();
    await Bun.sleep(20);
    const readsAtStop = state.reads;
    await Bun.sleep(40);
    expect(state.reads).toBe(readsAtStop);
    expect(state.collections).toBe(1);

    // Started again, it reads again.
    const again = pacing.start();
    await eventually(async () => state.reads > readsAtStop + 5);
    again.stop();
  });
});
