import { useEffect, useRef, useState } from 'preact/hooks';
import { PAGE } from '../../../domain/shared/limits.ts';
import { api, apiError } from './api.ts';
import { useThrottled } from './hooks.ts';
import { html } from './html.ts';
import { query } from './query.ts';
import { sessionIsOver } from './session.ts';
import type { Page } from './types.ts';

export type ListView<T> = { status: 'loading' | 'ready' | 'error'; items: T[]; next: string | null; error: string | null };
type Filters = Record<string, string>;

// A list read a page at a time, newest first. `reset` reads the first page (filters changed);
// `refresh` reads again from the top down to the oldest entry shown (a live change), keeping the
// older pages loaded; `older` reads the next page. An answer for filters no longer shown is dropped.
export function usePagedList<T extends { id: string }>(path: string, filters: Filters) {
  const [view, setView] = useState<ListView<T>>({ status: 'loading', items: [], next: null, error: null });
  const state = useRef({ gen: 0, view, filters });
  state.current.view = view;
  state.current.filters = filters;
  const read = (extra: Record<string, string | null>) => api<Page<T>>('GET', `${path}${query({ ...state.current.filters, ...extra })}`);

  async function reset() {
    const gen = ++state.current.gen;
    setView({ status: 'loading', items: [], next: null, error: null });
    try {
      const page = await read({});
      if (gen === state.current.gen) setView({ status: 'ready', items: page.items, next: page.next, error: null });
    } catch (error) {
      if (gen === state.current.gen) setView({ status: 'error', items: [], next: null, error: apiError(error).message });
    }
  }

  async function refreshNow() {
    const gen = state.current.gen;
    const shown = state.current.view.items;
    const since = shown.length > PAGE.size ? shown.at(-1)!.id : null;
    try {
      const page = await read(since ? { since, limit: String(PAGE.window) } : {});
      if (gen !== state.current.gen) return;
      setView((v) => ({ status: 'ready', items: page.items, next: since ? (page.next ?? v.next) : page.next, error: null }));
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

  const refresh = useThrottled(refreshNow);
  useEffect(() => {
    reset();
  }, [path, JSON.stringify(filters)]);
  return { view, setView, reset, refresh, older };
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
