import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { apiError, type ApiError } from './api.ts';

// A live change is shown at most this long after it is heard, however steady the traffic.
const REFRESH_WAIT_MS = 250;

// Runs `fn` at most `waitMs` after the first call, however many calls follow (a timer restarted on
// every call would never fire under steady traffic); a call made while it runs runs it once more.
function throttle(fn: () => unknown, waitMs: number) {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let running = false;
  let again = false;
  async function run() {
    timer = null;
    running = true;
    try {
      await fn();
    } finally {
      running = false;
      if (again) {
        again = false;
        schedule();
      }
    }
  }
  function schedule() {
    if (running) again = true;
    else timer ??= setTimeout(run, waitMs);
  }
  return schedule;
}

export function useThrottled(fn: () => unknown, waitMs = REFRESH_WAIT_MS) {
  const latest = useRef(fn);
  latest.current = fn;
  return useMemo(() => throttle(() => latest.current(), waitMs), []);
}

// A call at `iso` (the server's word for when something changes by the passing of time alone, such
// as a delivery turning Stalled), not earlier than in half a second. Armed again whenever `seen`
// changes, so that a look that came too early (the clocks disagree) is followed by another.
export function useTimeout(iso: string | null | undefined, fn: () => unknown, seen: unknown) {
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => {
    if (!iso) return;
    const timer = setTimeout(() => latest.current(), Math.max(Date.parse(iso) - Date.now(), 500) + 100);
    return () => clearTimeout(timer);
  }, [iso, seen]);
}

export type ActionState = { busy: boolean; error: ApiError | null };

// A button's action with the button busy meanwhile; its failure is kept for showing next to it.
// It answers the action's result (true for one that answers nothing), or undefined when it failed.
export function useAction(): [ActionState, <T>(action: () => Promise<T>) => Promise<NonNullable<T> | undefined>] {
  const [state, setState] = useState<ActionState>({ busy: false, error: null });
  async function run<T>(action: () => Promise<T>): Promise<NonNullable<T> | undefined> {
    setState({ busy: true, error: null });
    try {
      const result = await action();
      setState({ busy: false, error: null });
      return result ?? (true as NonNullable<T>);
    } catch (error) {
      setState({ busy: false, error: apiError(error) });
      return undefined;
    }
  }
  return [state, run];
}
