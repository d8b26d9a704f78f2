// Lets concurrent callers share one statement. A statement costs the database far more than the
// rows it writes (planning, locks, executor start-up, the commit and its WAL flush, a round trip),
// so under load many small writes are cheaper as one. An item is sent at once while fewer than
// `maxInFlight` statements are running, so a quiet service adds no wait; otherwise it waits for
// the next statement, which takes everything queued meanwhile (up to `maxBatch` items).
//
// A statement that fails for a reason other than the database being away is run again one item at
// a time, so that one bad item cannot fail the others with it.
export type BatchOptions = {
  maxInFlight: number;
  maxBatch: number;
  // Errors that would fail each item alone just the same (the database is unavailable, say).
  sharedFailure: (error: unknown) => boolean;
};

type Waiting<I, O> = { item: I; resolve: (value: O) => void; reject: (error: unknown) => void };

export function batcher<I, O>(run: (items: I[]) => Promise<O[]>, options: BatchOptions): (item: I) => Promise<O> {
  const queue: Waiting<I, O>[] = [];
  let inFlight = 0;

  const runAlone = (w: Waiting<I, O>) => run([w.item]).then(([out]) => w.resolve(out!), w.reject);

  const flush = () => {
    while (queue.length > 0 && inFlight < options.maxInFlight) {
      const batch = queue.splice(0, options.maxBatch);
      inFlight++;
      run(batch.map((w) => w.item))
        .then(
          (outs) => batch.forEach((w, i) => w.resolve(outs[i]!)),
          (error) => {
            if (batch.length === 1 || options.sharedFailure(error)) batch.forEach((w) => w.reject(error));
            else return Promise.all(batch.map(runAlone));
          },
        )
        .finally(() => {
          inFlight--;
          flush();
        });
    }
  };

  return (item) =>
    new Promise<O>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      flush();
    });
}
