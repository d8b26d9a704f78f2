import { fullGC, heapSize } from 'bun:jsc';

// JavaScriptCore collects young objects often and the old generation rarely. Every young
// collection under load finds the requests then in flight still in use and moves what they hold
// to the old generation, where it stays after they have been answered: about half a megabyte a
// collection on every route, the bench's bare SELECT included. The old generation is collected
// only once it is about twice the young budget, so a steadily busy process holds 30–45 MB of such
// garbage on top of what is live, and reaches its peak resident memory with it
// (docs/internals/performance.md#peak-memory). This collects the whole heap once what young
// collections leave has grown, since the last full collection, by half of what that one left, and
// by at least MIN_GROWTH: often while the live heap is small, when a full collection is short
// (15–27 ms at 17 MB), and seldom when it is large. A process whose heap does not move (idle) is
// never collected by it.
const MIN_GROWTH = 12 * 1_048_576;
const GROWTH_OF_LIVE = 0.5;
const LOOK_EVERY_MS = 100;

// The decision alone, on heap sizes read one after the other. A size below the one before comes
// after a collection, but also after whatever was allocated between that collection and the
// reading (several megabytes under load), so what the old generation holds is taken as the
// smaller of the last two such sizes: one reading taken late does not start a collection.
// A full collection of JavaScriptCore's own that leaves less than the last one is taken as the
// new baseline; one that leaves more (the live heap grew) looks like a young one, and the growth
// it shows counts towards the next collection here, as live growth does.
export function heapPacer(afterFull: number) {
  let previous = afterFull;
  let lastDrop: number | null = null;
  let held: number | null = null;
  return {
    // True when a full collection is due; `collected` then says what it left.
    observe(size: number): boolean {
      if (size < previous) {
        held = lastDrop === null ? null : Math.min(lastDrop, size);
        lastDrop = size;
      }
      previous = size;
      if (held === null) return false;
      if (held < afterFull) afterFull = held;
      return held - afterFull > Math.max(MIN_GROWTH, afterFull * GROWTH_OF_LIVE);
    },
    collected(size: number) {
      afterFull = previous = size;
      lastDrop = held = null;
    },
  };
}

type HeapAccess = { read: () => number; collect: () => void; everyMs: number };

// One timer however many services share the process (the tests run several): they share one
// heap. The first reading is taken at the first start, garbage of the start included; the first
// collection that leaves less lowers it (above).
export function heapPacing({ read, collect, everyMs }: HeapAccess) {
  let running: { timer: ReturnType<typeof setInterval>; users: number } | null = null;
  return {
    start(): { stop: () => void } {
      if (!running) {
        const pacer = heapPacer(read());
        const timer = setInterval(() => {
          if (!pacer.observe(read())) return;
          collect();
          pacer.collected(read());
        }, everyMs);
        timer.unref();
        running = { timer, users: 0 };
      }
      const started = running;
      started.users++;
      let stopped = false;
      return {
        stop: () => {
          if (stopped) return;
          stopped = true;
          if (--started.users > 0) return;
          clearInterval(started.timer);
          running = null;
        },
      };
    },
  };
}

const processHeap = heapPacing({ read: heapSize, collect: fullGC, everyMs: LOOK_EVERY_MS });
export const paceHeap = () => processHeap.start();
