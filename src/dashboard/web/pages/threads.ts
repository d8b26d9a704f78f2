import { useEffect, useState } from 'preact/hooks';
import { THREAD_STATES } from '../../../domain/shared/state-names.ts';
import { html } from '../shared/html.ts';
import { ListState, MoreButton, WaitingButton, usePagedList } from '../shared/lists.ts';
import { useLive, type LiveEvent } from '../shared/live.ts';
import { query } from '../shared/query.ts';
import { THREAD_STATE_LABELS, ThreadBody } from '../shared/thread-parts.ts';
import type { ListedThread } from '../shared/types.ts';
import { Time, plural } from '../shared/ui.ts';

function ThreadCard({ thread, departed }: { thread: ListedThread; departed: boolean }) {
  return html`<li class=${`card thread${departed ? ' departed' : ''}`} data-thread=${thread.id}>
    ${departed ? html`<p class="departed-note">No longer in this view: kept while you look at it.</p>` : null}
    <div class="card-head">
      <h3><a href=${`/dashboard/threads/${thread.id}`}>${thread.title}</a></h3>
      <span class=${`badge state-${thread.state}`}>${THREAD_STATE_LABELS[thread.state]}</span>
      <span class="hint activity">Last activity <${Time} iso=${thread.lastActivityAt} /></span>
    </div>
    <${ThreadBody} thread=${thread} level=${4} />
  </li>`;
}

export function ThreadsPage() {
  const params = new URLSearchParams(location.search);
  const [filters, setFilters] = useState({ state: params.get('state') ?? '', q: params.get('q') ?? '' });
  // Nothing opens in place here; the list holds still while the person is scrolled down or typing
  // in a card's post box.
  const list = usePagedList<ListedThread>('/threads', filters, { keyOf: (t) => t.cursor, holds: { isOpen: () => false } });
  useEffect(() => history.replaceState(null, '', query(filters) || location.pathname), [JSON.stringify(filters)]);
  // A new message moves its thread up, and the stream tells of it only by its deliveries: a new one
  // is Accepted with no attempt yet.
  const posted = (event: LiveEvent) => event.type === 'delivery' && event.delivery.step === 'accepted' && event.delivery.attempts.length === 0;
  useLive((event) => (event.type === 'thread' || event.type === 'ready' || posted(event)) && list.refresh());
  function apply(event: Event) {
    event.preventDefault?.();
    const target = event.currentTarget as HTMLFormElement | HTMLSelectElement;
    const data = new FormData(target instanceof HTMLSelectElement ? target.form! : target);
    setFilters({ state: String(data.get('state') ?? ''), q: String(data.get('q') ?? '').trim() });
  }
  const filtered = filters.state || filters.q;
  return html`
    <h1>Threads</h1>
    <p class="hint">Most recent activity first: a new message, a close request or a decision moves a thread to the top. Confirm or decline close requests, remove participants and post as yourself; open a thread for its messages.</p>
    <form class="filters" role="search" aria-label="Filter threads" onSubmit=${apply}>
      <div class="field wide">
        <label for="threads-q">Search</label>
        <input id="threads-q" name="q" type="search" defaultValue=${filters.q} placeholder="Title, goal or participant" />
      </div>
      <div class="field">
        <label for="threads-state">State</label>
        <select id="threads-state" name="state" value=${filters.state} onChange=${apply}>
          <option value="">Any state</option>
          ${THREAD_STATES.map((state) => html`<option value=${state}>${THREAD_STATE_LABELS[state]}</option>`)}
        </select>
      </div>
      <div class="buttons"><button type="submit">Apply</button></div>
    </form>
    <h2>${filters.state === 'close-pending' ? 'Close requests' : filtered ? 'Matching threads' : 'All threads'}</h2>
    <${ListState} view=${list.view} noun="threads" onRetry=${list.reset}
      empty=${filters.state === 'close-pending' ? 'No close requests wait for a decision.' : filtered ? 'No threads match.' : 'No threads yet. Agents open them.'} />
    <${WaitingButton} list=${list} label=${(n: number) => `${plural(n, 'thread')} with new activity`} />
    <ul class="cards" ref=${list.box}>${list.view.items.map((t) => html`<${ThreadCard} key=${t.id} thread=${t} departed=${list.view.departed.has(t.id)} />`)}</ul>
    <${MoreButton} list=${list} noun="threads" />
  `;
}
