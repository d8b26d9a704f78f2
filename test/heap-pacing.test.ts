import { describe, expect, test } from 'bun:test';
import { heapPacer } from '../src/heap-pacing';

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

describe('heap pacing', () => {
  test('an idle heap, or one only growing, is never collected', () => {
    expect(run(17, Array(50).fill(17))).toEqual([]);
    expect(run(17, Array.from({ length: 50 }, (_, i) => 17 + i * 4))).toEqual([]);
  });

  test('collects once young collections leave more than 12 MB over what the last full one left', () => {
    // Each young collection leaves 2 MB more than the one before: 19, 21, …; 31 is past 17 + 12.
    const sizes = [17, 40, 19, 45, 21, 46, 23, 47, 25, 48, 27, 49, 29, 50, 31, 52];
    expect(run(17, sizes, 18)).toEqual([14]);
    // Exactly 12 MB over is not yet past it.
    expect(run(17, [40, 29, 45, 29], 18)).toEqual([]);
  });

  test('after a full collection it counts from what that one left', () => {
    // Asked at 31 (index 3), which leaves 18: the next ask needs more than 30.
    const sizes = [40, 25, 45, 31, 50, 29, 52, 30, 55, 31];
    expect(run(17, sizes, 18)).toEqual([3, 9]);
  });

  test('a large live heap is collected after half of it again, not after 12 MB', () => {
    // 100 MB live: 112 is not enough, more than 150 is.
    expect(run(100, [130, 112, 140, 130, 170, 149, 180, 150])).toEqual([]);
    expect(run(100, [130, 112, 170, 151])).toEqual([3]);
  });

  test("a collection of JavaScriptCore's own that leaves less is the new baseline", () => {
    // Its own full collection leaves 10: 23 is then more than 12 over it.
    expect(run(17, [40, 10, 30, 23])).toEqual([3]);
  });
});
