// Whether `work` settles within `ms`: true once it resolves, its rejection if it rejects in time,
// false when the time runs out or `abort` fires first (a later rejection is then dropped). For
// stops that wait for work only so long, and for waits that a wake-up may end early.
export function settlesWithin(work: Promise<unknown>, ms: number, abort?: AbortSignal): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const finish = (settle: () => void) => {
      clearTimeout(timer);
      abort?.removeEventListener('abort', gone);
      settle();
    };
    const gone = () => finish(() => resolve(false));
    // The runtime's timers count whole milliseconds and drop the fraction, so a wait's remaining
    // 2 999.9 ms would end 0.9 ms before its deadline; rounding up never ends one early.
    const timer = setTimeout(gone, Math.ceil(ms));
    abort?.addEventListener('abort', gone, { once: true });
    work.then(
      () => finish(() => resolve(true)),
      (error: unknown) => finish(() => reject(error)),
    );
  });
}
