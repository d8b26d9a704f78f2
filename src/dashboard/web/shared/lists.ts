import { useEffect, useRef, useState } from 'preact/hooks';
import { PAGE } from '../../../domain/shared/limits.ts';
import { api, apiError } from './api.ts';
import { useThrottled } from './hooks.ts';
import { html } from './html.ts';
import { query } from './query.ts';
import { sessionIsOver } from './session.ts';
import type { Page } from './types.ts';

export type ListView<T> = {
  status: 'loading' | 'ready' | 'error';
  items: T[];
  next: string | null;
  error: string | null;
  // Held back while the person reads (see `holds`): how many new entries wait above, and the keys
  // of entries shown that have left the view since.
  waiting: number;
  departed: Set<string>;
};
type Filters = Record<string, string>;
type Options<T> = {
  keyOf?: (item: T) => string;
  // A live list that must not move under its reader: the entries a person opened, which stay on the
  // page even once they leave the view.
  holds?: { isOpen: (item: T) => boolean };
};

const fresh = <T>(status: ListView<T>['status'], items: T[] = [], next: string | null = null, error: string | null = null): ListView<T> => ({
  status,
  items,
  next,
  error,
  waiting: 0,
  departed: new Set(),
});

// A page scrolled this little is at the top: new entries arriving there push nothing out of sight.
const TOP_SLACK_PX = 8;

// A list read a page at a time, newest first. `reset` reads the first page (filters changed);
// `refresh` reads again from the top down to the oldest entry shown (a live change), keeping the
// older pages loaded; `older` reads the next page. An answer for filters no longer shown is dropped.
// `keyOf` names an item's place in the order (its id, unless the list is ordered by something that
// changes, such as last activity): `since` reads down to the key of the oldest item shown.
//
// A list that `holds` never moves under its reader: while the person is scrolled down, has an
// entry open, or has the keyboard focus in the list, a refresh changes entries in place and keeps
// those that left the view (marked departed); new ones wait, counted, until the person asks to see
// them (`showWaiting`) or is back at the top. Otherwise the refresh shows the list as read, keeping
// open entries that left the view where they were.
export function usePagedList<T extends { id: string }>(path: string, filters: Filters, { keyOf = (item: T) => item.id, holds }: Options<T> = {}) {
  const [view, setView] = useState<ListView<T>>(() => fresh('loading'));
  const state = useRef({ gen: 0, view, filters, holds });
  const box = useRef<HTMLElement>(null);
  state.current.view = view;
  state.current.filters = filters;
  state.current.holds = holds;
  const read = (extra: Record<string, string | null>) => api<Page<T>>('GET', `${path}${query({ ...state.current.filters, ...extra })}`);

  async function reset() {
    const gen = ++state.current.gen;
    setView(fresh('loading'));
    try {
      const page = await read({});
      if (gen === state.current.gen) setView(fresh('ready', page.items, page.next));
    } catch (error) {
      if (gen === state.current.gen) setView(fresh('error', [], null, apiError(error).message));
    }
  }

  // Read from the ref: the scroll listener below outlives the render that made it.
  const reading = () => {
    const { view, holds } = state.current;
    return window.scrollY > TOP_SLACK_PX || view.items.some((item) => holds!.isOpen(item)) || !!box.current?.contains(document.activeElement);
  };

  async function refreshNow({ showAll = false } = {}) {
    const gen = state.current.gen;
    const shown = state.current.view.items;
    const since = shown.length > PAGE.size ? keyOf(shown.at(-1)!) : null;
    try {
      const page = await read(since ? { since, limit: String(PAGE.window) } : {});
      if (gen !== state.current.gen) return;
      // Older pages came in while this read was out: it does not reach down to them, and applied
      // as it is it would take them off the page again. Read again, down to the oldest shown.
      if (state.current.view.items.length > shown.length) return refreshNow({ showAll });
      const next = (v: ListView<T>) => (since ? (page.next ?? v.next) : page.next);
      if (!holds) return setView((v) => fresh('ready', page.items, next(v)));
      const hold = !showAll && reading();
      setView((v) => (hold ? heldBack(v, page.items, keyOf) : { ...shownAsRead(v, page.items, holds.isOpen), next: next(v) }));
    } catch (error) {
      // An ended session is said once, at the top of the page.
      if (gen !== state.current.gen || sessionIsOver()) return;
      const message = apiError(error).message;
      setView((v) => (v.items.length > 0 ? { ...v, error: message } : { ...v, status: 'error', error: message }));
    }
  }

  async function older() {
    const gen = state.current.gen;
    try {
      const page = await read({ after: state.current.view.next });
      if (gen !== state.current.gen) return;
      setView((v) => {
        const seen = new Set(v.items.map((item) => item.id));
        return { ...v, items: [...v.items, ...page.items.filter((item) => !seen.has(item.id))], next: page.next, error: null };
      });
    } catch (error) {
      setView((v) => ({ ...v, error: apiError(error).message }));
    }
  }

  async function showWaiting() {
    await refreshNow({ showAll: true });
    box.current?.scrollIntoView({ block: 'start' });
  }

  const refresh = useThrottled(refreshNow);
  // Back at the top with entries waiting: they come in, as they would have had the person been there.
  useEffect(() => {
    if (!holds) return;
    const onScroll = () => state.current.view.waiting > 0 && !reading() && refresh();
    addEventListener('scroll', onScroll, { passive: true });
    return () => removeEventListener('scroll', onScroll);
  }, []);

  useEffect(() => {
    reset();
  }, [path, JSON.stringify(filters)]);
  return { view, setView, reset, refresh, older, showWaiting, box };
}

// While the person reads: entries still in view changed in place, the ones that left kept and
// marked; counted as waiting, the new ones and those whose place in the order moved (a thread
// with new activity), which the list would show elsewhere.
function heldBack<T extends { id: string }>(v: ListView<T>, read: T[], keyOf: (item: T) => string): ListView<T> {
  const byId = new Map(read.map((item) => [item.id, item]));
  const shownKeys = new Map(v.items.map((item) => [item.id, keyOf(item)]));
  const departed = new Set(v.items.filter((item) => !byId.has(item.id)).map((item) => item.id));
  return {
    ...v,
    status: 'ready',
    error: null,
    items: v.items.map((item) => byId.get(item.id) ?? item),
    waiting: read.filter((item) => shownKeys.get(item.id) !== keyOf(item)).length,
    departed,
  };
}

// The list as read, with each open entry that left the view kept at the place it had.
function shownAsRead<T extends { id: string }>(v: ListView<T>, read: T[], isOpen: (item: T) => boolean): ListView<T> {
  const items = [...read];
  const inRead = new Set(read.map((item) => item.id));
  const departed = new Set<string>();
  v.items.forEach((item, index) => {
    if (inRead.has(item.id) || !isOpen(item)) return;
    items.splice(Math.min(index, items.length), 0, item);
    departed.add(item.id);
  });
  return { ...v, status: 'ready', error: null, items, waiting: 0, departed };
}

// What a list shows when it has nothing to show: loading, a failed first load (with a way to try
// again; the live view goes on and retries by itself), or nothing there.
export function ListState<T>({ view, noun, empty, onRetry }: { view: ListView<T>; noun: string; empty: string; onRetry: () => void }) {
  if (view.status === 'loading') return html`<p class="hint placeholder" role="status">Loading ${noun}…</p>`;
  if (view.status === 'error') {
    return html`<div class="notice problem" role="alert">
      <p>Could not load the ${noun}: ${view.error}</p>
      <button type="button" onClick=${onRetry}>Try again</button>
    </div>`;
  }
  if (view.items.length === 0) return html`<p class="hint placeholder">${empty}</p>`;
  if (view.error) return html`<p class="notice problem" role="alert">Could not refresh the ${noun}: ${view.error} What is shown may be out of date.</p>`;
  return null;
}

// The count of new entries held back while the person reads, kept in sight at the top of the
// screen; showing them brings the list's top into view.
export function WaitingButton<T>({ list, label }: { list: { view: ListView<T>; showWaiting: () => Promise<void> }; label: (waiting: number) => string }) {
  const { waiting } = list.view;
  return html`<div class="waiting" role="status">${waiting > 0 ? html`<button type="button" onClick=${list.showWaiting}>${label(waiting)} — show</button>` : null}</div>`;
}

export function MoreButton<T>({ list, noun }: { list: { view: ListView<T>; older: () => Promise<void> }; noun: string }) {
  const [busy, setBusy] = useState(false);
  if (!list.view.next) return null;
  return html`<p class="more">
    <button type="button" class="quiet" disabled=${busy} onClick=${async () => {
      setBusy(true);
      await list.older();
      setBusy(false);
    }}>${busy ? 'Loading…' : `Show older ${noun}`}</button>
  </p>`;
}
