import { fullGC, heapSize } from 'bun:jsc';

// JavaScriptCore collects young objects often and the old generation rarely. Every young
// collection under load finds the requests then in flight still in use and moves what they hold
// to the old generation, where it stays after they have been answered: about half a megabyte a
// collection on every route, the bench's bare SELECT included. The old generation is collected
// only once it is about twice the young budget, so a steadily busy process holds 30–45 MB of such
// garbage on top of what is live, and reaches its peak resident memory with it
// (docs/internals/performance.md#peak-memory). This collects the whole heap once the size a young
// collection leaves has grown, since the last full collection, by half of what that one left, and
// by at least MIN_GROWTH: often while the live heap is small, when a full collection is short
// (15–27 ms at 17 MB), and seldom when it is large. An idle process allocates nothing, its size
// does not move and nothing runs.
const MIN_GROWTH = 12 * 1_048_576;
const GROWTH_OF_LIVE = 0.5;
const LOOK_EVERY_MS = 100;

// The decision alone, on heap sizes read one after the other: a size below the one before is what
// a collection left, and the last such size is what the old generation holds now.
export function heapPacer(afterFull: number) {
  let previous = afterFull;
  let held: number | null = null;
  return {
    // True when a full collection is due; `collected` then says what it left.
    observe(size: number): boolean {
      if (size < previous) held = size;
      previous = size;
      if (held === null) return false;
      // A collection of JavaScriptCore's own that left less than the last full one is a full one.
      if (held < afterFull) afterFull = held;
      return held - afterFull > Math.max(MIN_GROWTH, afterFull * GROWTH_OF_LIVE);
    },
    collected(size: number) {
      afterFull = previous = size;
      held = null;
    },
  };
}

// One pacer for the process, however many services it runs (the tests run several): they share
// one heap.
let running: { timer: ReturnType<typeof setInterval>; users: number } | null = null;

export function paceHeap(): { stop: () => void } {
  if (!running) {
    const pacer = heapPacer(heapSize());
    const timer = setInterval(() => {
      if (!pacer.observe(heapSize())) return;
      fullGC();
      pacer.collected(heapSize());
    }, LOOK_EVERY_MS);
    timer.unref();
    running = { timer, users: 0 };
  }
  running.users++;
  let stopped = false;
  return {
    stop: () => {
      if (stopped || !running) return;
      stopped = true;
      if (--running.users === 0) {
        clearInterval(running.timer);
        running = null;
      }
    },
  };
}
