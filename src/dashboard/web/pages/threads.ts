import { useEffect, useState } from 'preact/hooks';
import { THREAD_STATES } from '../../../domain/shared/state-names.ts';
import { html } from '../shared/html.ts';
import { ListState, MoreButton, usePagedList } from '../shared/lists.ts';
import { useLive } from '../shared/live.ts';
import { query } from '../shared/query.ts';
import { THREAD_STATE_LABELS, ThreadBody } from '../shared/thread-parts.ts';
import type { Thread } from '../shared/types.ts';

function ThreadCard({ thread }: { thread: Thread }) {
  return html`<li class="card thread" data-thread=${thread.id}>
    <div class="card-head">
      <h3><a href=${`/dashboard/threads/${thread.id}`}>${thread.title}</a></h3>
      <span class=${`badge state-${thread.state}`}>${THREAD_STATE_LABELS[thread.state]}</span>
    </div>
    <${ThreadBody} thread=${thread} level=${4} />
  </li>`;
}

export function ThreadsPage() {
  const params = new URLSearchParams(location.search);
  const [filters, setFilters] = useState({ state: params.get('state') ?? '', q: params.get('q') ?? '' });
  const list = usePagedList<Thread>('/threads', filters);
  useEffect(() => history.replaceState(null, '', query(filters) || location.pathname), [JSON.stringify(filters)]);
  useLive((event) => (event.type === 'thread' || event.type === 'ready') && list.refresh());
  function apply(event: Event) {
    event.preventDefault?.();
    const target = event.currentTarget as HTMLFormElement | HTMLSelectElement;
    const data = new FormData(target instanceof HTMLSelectElement ? target.form! : target);
    setFilters({ state: String(data.get('state') ?? ''), q: String(data.get('q') ?? '').trim() });
  }
  const filtered = filters.state || filters.q;
  return html`
    <h1>Threads</h1>
    <p class="hint">Newest first. Confirm or decline close requests, remove participants and post as yourself; open a thread for its messages.</p>
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
    <ul class="cards">${list.view.items.map((t) => html`<${ThreadCard} key=${t.id} thread=${t} />`)}</ul>
    <${MoreButton} list=${list} noun="threads" />
  `;
}
