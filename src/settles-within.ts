// Whether `work` settles within `ms`: true once it resolves, its rejection if it rejects in time,
// false when the time runs out (a later rejection is then dropped). For stops that wait for work
// only so long.
export async function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const settled = work.then(() => true as const);
  const inTime = await Promise.race([settled, timedOut]).finally(() => clearTimeout(timer));
  if (!inTime) settled.catch(() => {});
  return inTime;
}
