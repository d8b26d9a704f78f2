import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { DELIVERY_STATES, type DeliveryState } from '../../../domain/shared/state-names.ts';
import { api, apiError } from '../shared/api.ts';
import { STATE_LABELS, STEPS, stateClass, stateOf, stepName } from '../shared/delivery-state.ts';
import { useAction, useTimeout } from '../shared/hooks.ts';
import { html } from '../shared/html.ts';
import { confirmAction } from '../shared/confirm.ts';
import { ListState, MoreButton, WaitingButton, usePagedList } from '../shared/lists.ts';
import { useLive } from '../shared/live.ts';
import { query } from '../shared/query.ts';
import { toast } from '../shared/toast.ts';
import type { Attempt, Delivery, Refused, Thread, WebhookTrouble } from '../shared/types.ts';
import { WebhookBanners, healthLink, useWebhookTrouble } from '../shared/webhook-trouble.ts';
import {
  ErrorText,
  HeaderTable,
  Time,
  failureKind,
  formatMs,
  fromTimeField,
  fullTime,
  plural,
  prettyJson,
  refusedText,
  toTimeField,
} from '../shared/ui.ts';

const STATES: [DeliveryState | '', string][] = [['', 'Any state'], ...DELIVERY_STATES.map((state): [DeliveryState, string] => [state, STATE_LABELS[state]])];
const FILTERS = ['q', 'state', 'agent', 'thread', 'within', 'from', 'to'] as const;
type Filters = Record<(typeof FILTERS)[number], string>;

// The time filter: a window ending now, chosen in one control, or a range typed as two times.
const WITHIN: Record<string, [string, number]> = {
  '1h': ['Last hour', 3_600_000],
  '24h': ['Last 24 hours', 86_400_000],
  '7d': ['Last 7 days', 604_800_000],
};
const CUSTOM = 'custom';

// What the API is asked: a window becomes its start, taken when the filters were applied.
function apiFilters(filters: Filters): Record<string, string> {
  const { within, ...rest } = filters;
  const windowMs = WITHIN[within]?.[1];
  return windowMs ? { ...rest, from: new Date(Date.now() - windowMs).toISOString(), to: '' } : rest;
}

type PipelineState = 'done' | 'todo' | 'skipped' | 'failed' | 'stalled';
const NOTES: Record<PipelineState, string> = {
  done: '',
  todo: ' (not yet)',
  skipped: ' (not applicable: polling)',
  failed: ' (failed here)',
  stalled: ' (stalled)',
};

// A step is done when its time is recorded. A failed delivery is marked failed on the step it
// reached and failed at, as its "Failed at …" sentence says; a polling delivery has no doorbell, so
// Notified and Delivered do not apply to it.
function Pipeline({ d, compact }: { d: Delivery; compact?: boolean }) {
  const failedAt = d.step === 'failed' ? STEPS.findIndex(([key]) => key === d.failedStep) : -1;
  return html`<ol class=${compact ? 'pipeline compact' : 'pipeline'} aria-label="Progress">
    ${STEPS.map(([key, at], i) => {
      const label = STATE_LABELS[key];
      let state: PipelineState = d[at] ? 'done' : 'todo';
      if (!d.webhook && (key === 'notified' || key === 'delivered')) state = 'skipped';
      if (i === failedAt) state = 'failed';
      if (d.stalled && key === 'delivered') state = 'stalled';
      const note = NOTES[state];
      return html`<li key=${key} class=${state} title=${d[at] ? `${label}: ${fullTime(d[at])}${note}` : `${label}${note}`}>
        <span class="dot" aria-hidden="true"></span><span class=${compact ? 'sr' : ''}>${label}</span><span class="sr">${note}</span>
      </li>`;
    })}
  </ol>`;
}

// When the next doorbell goes: a time only while one is ahead. A due doorbell held back by its
// endpoint's cap on concurrent requests has no time to show, and a past one would read as stuck.
function NextAttempt({ d }: { d: Delivery }) {
  if (d.waitingForSlot) return html`Waiting for a free slot at its endpoint`;
  if (!d.nextAttemptAt || Date.parse(d.nextAttemptAt) <= Date.now()) return html`Due now`;
  return html`next attempt at <${Time} iso=${d.nextAttemptAt} short />`;
}

function Status({ d }: { d: Delivery }) {
  if (d.step === 'failed') {
    return html`<p class="error">Failed at ${stepName(d.failedStep) ?? d.failedStep}${d.error ? `: ${d.error}` : ''}</p>`;
  }
  if (d.retrying) {
    return html`<p class="warn">
      Retrying: attempt ${d.attempts.at(-1)?.attempt ?? '?'} failed (${d.lastError ?? 'no answer'}); <${NextAttempt} d=${d} />.
    </p>`;
  }
  if (d.waitingForSlot) return html`<p class="warn">Waiting for a free slot at its endpoint: its doorbell goes as soon as one is free.</p>`;
  if (d.stalled) return html`<p class="warn">Stalled: notified, but the handler never reported delivered.</p>`;
  return null;
}

// The newest attempt in a word and a figure ("HTTP 500 · 84 ms"), for the list's row.
function LastAttempt({ d }: { d: Delivery }) {
  const a = d.attempts.at(-1);
  if (!a) return null;
  const outcome = a.interrupted ? 'cut off' : failureKind(a);
  return html`<span class=${`last-attempt${a.status != null && a.status < 300 ? '' : ' failed'}`} title=${a.error ?? ''}>
    <span class="sr">Last attempt: </span>${outcome}${a.interrupted ? '' : ` · ${formatMs(a.durationMs)}`}
  </span>`;
}

// Which run an attempt belongs to: the original publish, a re-publish by the sweep, or a resend.
const attemptRun = (a: Attempt) => (a.resend > 0 ? `Resend ${a.resend}` : a.publish > 1 ? `Re-publish ${a.publish}` : 'First publish');

// The handler's answer first, then what was sent: the answer is what a person opens this for, and
// on a phone the request's headers and payload would push it a screen or two down.
function AttemptDetail({ a, payload }: { a: Attempt; payload: string | null }) {
  const sent = Object.keys(a.requestHeaders ?? {}).length > 0;
  return html`<details class="attempt-detail">
    <summary>Request and response</summary>
    <dl>
      <dt>Sent to</dt>
      <dd>${a.url ? html`<code>${a.url}</code>` : 'Not recorded.'}</dd>
      <dt>Response status</dt>
      <dd>${a.status ?? 'None: no answer.'}</dd>
      <dt>Response body (first KiB)</dt>
      <dd>${a.responseBody ? html`<pre>${prettyJson(a.responseBody)}</pre>` : 'None.'}</dd>
      <dt>Response headers</dt>
      <dd><${HeaderTable} headers=${a.responseHeaders} caption="Response headers"
        none=${a.status === null ? 'None: no answer came.' : 'Not recorded (logged before headers were kept).'} /></dd>
      <dt>Headers sent</dt>
      <dd><${HeaderTable} headers=${a.requestHeaders} caption="Headers sent" none="None: nothing was sent." /></dd>
      <dt>Payload sent</dt>
      <dd>${sent && payload
        ? html`<pre>${prettyJson(payload)}</pre>
            <details class="raw"><summary>As sent, byte for byte (what the signature covers)</summary><pre>${payload}</pre></details>`
        : 'None.'}</dd>
    </dl>
  </details>`;
}

const ATTEMPT_COLUMNS = ['Time', 'Run', 'Attempt', 'Status', 'Duration', 'Error', 'Detail'] as const;

function AttemptLog({ d }: { d: Delivery }) {
  if (d.attempts.length === 0) {
    return html`<p class="hint">${d.webhook ? 'No notification attempts yet.' : 'Polling agent: no notifications are sent.'}</p>`;
  }
  const [time, run, attempt, status, duration, error, detail] = ATTEMPT_COLUMNS;
  return html`<details class="attempts">
    <summary>Attempt log (${d.attempts.length})</summary>
    <table>
      <thead><tr>${ATTEMPT_COLUMNS.map((c) => html`<th scope="col">${c}</th>`)}</tr></thead>
      <tbody>
        ${d.attempts.map((a, i) => html`<tr key=${i} class=${a.interrupted ? 'interrupted' : ''}>
          <td data-label=${time}><${Time} iso=${a.attemptedAt} precise /></td>
          <td data-label=${run}>${attemptRun(a)}</td>
          <td data-label=${attempt}>${a.attempt}</td>
          <td data-label=${status}>${a.status ?? '—'}</td>
          <td data-label=${duration}>${a.interrupted ? '—' : formatMs(a.durationMs)}</td>
          <td data-label=${error}>${a.error ?? ''}</td>
          <td data-label=${detail}><${AttemptDetail} a=${a} payload=${d.payload} /></td>
        </tr>`)}
      </tbody>
    </table>
  </details>`;
}

// A resent delivery leaves Failed and its button goes with it: the focus moves to the row's
// Details button rather than falling to the top of the page.
function ResendButton({ d, focusAfter }: { d: Delivery; focusAfter: () => void }) {
  const [action, run] = useAction();
  if (d.step !== 'failed') return null;
  return html`<span class="resend">
    <button type="button" disabled=${action.busy} aria-describedby=${`resend-error-${d.id}`}
      onClick=${async (event: MouseEvent) => {
        const button = event.currentTarget as HTMLButtonElement;
        if (await run(() => api('POST', `/deliveries/${d.id}/resend`))) {
          toast(`Resent to ${d.recipient}.`);
          focusAfter();
        } else button.focus();
      }}>Resend</button>
    <${ErrorText} id=${`resend-error-${d.id}`} error=${action.error?.message} />
  </span>`;
}

function DeliveryRows({ d, open, departed, onToggle }: { d: Delivery; open: boolean; departed: boolean; onToggle: () => void }) {
  const detailId = `detail-${d.id}`;
  const details = useRef<HTMLButtonElement>(null);
  return html`<tbody class=${`delivery step-${d.step}${d.stalled ? ' stalled' : ''}${departed ? ' departed' : ''}`} data-delivery=${d.id} data-step=${d.step} data-message=${d.messageId}>
    <tr>
      <td data-label="Accepted"><${Time} iso=${d.createdAt} /></td>
      <td data-label="Message" class="message-cell">
        <span class="summary">${d.summary || '(no summary)'}</span>
        <span class="hint">${d.sender} in <a href=${`/dashboard/threads/${d.threadId}`}>${d.thread}</a></span>
        ${departed ? html`<span class="departed-note">No longer in this view: kept while you look at it.</span>` : null}
      </td>
      <td data-label="Recipient">${d.recipient}${d.webhook ? '' : html` <span class="hint">(polling)</span>`}</td>
      <td data-label="Progress"><${Pipeline} d=${d} compact /></td>
      <td data-label="State">
        <span class=${stateClass(d)}>${stateOf(d)}</span>
        ${d.acknowledgedAt ? html` <span class="badge muted">Acknowledged</span>` : null}
        <${LastAttempt} d=${d} />
      </td>
      <td class="actions">
        <button type="button" class="quiet" ref=${details} aria-expanded=${open ? 'true' : 'false'} aria-controls=${detailId} onClick=${onToggle}>
          ${open ? 'Hide' : 'Details'}<span class="sr"> of the delivery to ${d.recipient}</span>
        </button>
        <${ResendButton} d=${d} focusAfter=${() => details.current?.focus()} />
      </td>
    </tr>
    ${open
      ? html`<tr class="detail-row" id=${detailId}>
          <td colspan="6">
            <${Pipeline} d=${d} />
            <${Status} d=${d} />
            <p class="hint ids">Delivery <code>${d.id}</code> · message <code>${d.messageId}</code></p>
            <${AttemptLog} d=${d} />
          </td>
        </tr>`
      : null}
  </tbody>`;
}

const noFilters = (): Filters => ({ q: '', state: '', agent: '', thread: '', within: '', from: '', to: '' });

function filtersFromAddress(): Filters {
  const params = new URLSearchParams(location.search);
  const filters = noFilters();
  for (const key of FILTERS) filters[key] = params.get(key) ?? '';
  if (!WITHIN[filters.within]) filters.within = '';
  // Links made before the state filter (?failed=true and the like) still open the view they meant.
  for (const state of ['failed', 'retrying', 'stalled'] as const) if (!filters.state && params.get(state) === 'true') filters.state = state;
  return filters;
}

// Views that can hold Failed deliveries: any state, or Failed.
const RESENDABLE_STATES = ['', 'failed'];

// Resending to a webhook that still fails only fails again: the person is told why, and where to
// test it, instead of being offered the button.
function BulkResend({ filters, agentTrouble, onDone }: { filters: Record<string, string>; agentTrouble: WebhookTrouble | null; onDone: () => void }) {
  if (!RESENDABLE_STATES.includes(filters.state ?? '')) return null;
  if (agentTrouble?.state === 'failing') {
    return html`<p class="hint resend-withheld" data-resend-withheld>
      No resend offered: ${agentTrouble.username}'s webhook is still failing${agentTrouble.failure ? ` with ${agentTrouble.failure}` : ''}${agentTrouble.failingSince
        ? html`, since <${Time} iso=${agentTrouble.failingSince} short />`
        : ''}, so what is resent would fail again. Fix its handler, send a test event from <a href=${healthLink(agentTrouble.username)}>its webhook health</a>,
      then resend once it answers 2xx.
    </p>`;
  }
  return html`<${BulkResendButton} filters=${filters} onDone=${onDone} />`;
}

// The count is read first and confirmed in the page's dialog; the button keeps the focus through
// it all (a disabled button would drop it), so a keyboard user carries on from where they were.
function BulkResendButton({ filters, onDone }: { filters: Record<string, string>; onDone: () => void }) {
  const [state, setState] = useState<{ busy: boolean; message: string | null; error: string | null }>({ busy: false, message: null, error: null });
  async function resend(event: MouseEvent) {
    const button = event.currentTarget as HTMLButtonElement;
    if (state.busy) return;
    setState({ busy: true, message: null, error: null });
    try {
      const { failed, upTo } = await api<{ failed: number; upTo: string | null }>('GET', `/deliveries/failed-in-view${query(filters)}`);
      if (failed === 0) return setState({ busy: false, message: 'No Failed deliveries in this view: nothing to resend.', error: null });
      const confirmed = await confirmAction({
        title: `Resend ${plural(failed, 'Failed delivery', 'Failed deliveries')}?`,
        body: [
          `Each of the ${plural(failed, 'Failed delivery', 'Failed deliveries')} in this view goes back to Accepted and its doorbell is rung again.`,
          'Deliveries that fail after this count are not included. One that cannot be resent (its recipient archived, say) is left as it is and counted.',
        ],
        confirm: `Resend ${failed}`,
      });
      if (!confirmed) return setState({ busy: false, message: null, error: null });
      const done = await api<{ resent: number; refused: Refused }>('POST', '/deliveries/resend-failed', { ...filters, upTo });
      setState({ busy: false, message: `Resent ${done.resent} of ${failed}.${refusedText(done.refused)}`, error: null });
      onDone();
    } catch (error) {
      setState({ busy: false, message: null, error: apiError(error).message });
    } finally {
      if (button.isConnected) button.focus();
    }
  }
  return html`<div class="bulk">
    <button type="button" class="quiet" aria-disabled=${state.busy ? 'true' : null} onClick=${resend}>Resend all Failed in this view…</button>
    <span class="hint" role="status">${state.message ?? ''}</span>
    <${ErrorText} id="bulk-error" error=${state.error} />
  </div>`;
}

export function DeliveriesPage() {
  const [filters, setFilters] = useState(filtersFromAddress);
  const [formKey, setFormKey] = useState(0);
  const [expanded, setExpanded] = useState(() => new Set<string>());
  const [when, setWhen] = useState(() => filters.within || (filters.from || filters.to ? CUSTOM : ''));
  const [timeError, setTimeError] = useState<string | null>(null);
  // On a phone the filters start folded, so that the deliveries are what the screen shows first.
  const [roomy] = useState(() => matchMedia('(min-width: 601px)').matches);
  const [threadTitle, setThreadTitle] = useState<string | null>(null);
  const asked = useMemo(() => apiFilters(filters), [JSON.stringify(filters)]);
  const list = usePagedList<Delivery>('/deliveries', asked, { holds: { isOpen: (d) => expanded.has(d.id) } });
  const { view } = list;

  useEffect(() => {
    const { within, from, to, ...rest } = filters;
    history.replaceState(null, '', query(within ? { ...rest, within } : { ...rest, from, to }) || location.pathname);
    setThreadTitle(null);
    if (filters.thread) api<Thread>('GET', `/threads/${filters.thread}`).then((t) => setThreadTitle(t.title), () => {});
  }, [JSON.stringify(filters)]);

  // A change to a delivery on screen is drawn at once; the list is read again (at most every
  // REFRESH_WAIT_MS) for what else the change may bring into or out of view.
  useLive((event) => {
    if (event.type === 'delivery') {
      const changed = event.delivery;
      list.setView((v) => (v.items.some((d) => d.id === changed.id) ? { ...v, items: v.items.map((d) => (d.id === changed.id ? changed : d)) } : v));
      list.refresh();
    } else if (event.type === 'ready') list.refresh();
  });
  // Stalling is the passing of time, not a change in the database: look again when one is due.
  const nextStall = view.items
    .filter((d) => d.stallsAt && !d.stalled)
    .map((d) => d.stallsAt!)
    .sort()[0];
  useTimeout(nextStall, list.refresh, view.items);

  function apply(event: Event) {
    event.preventDefault?.();
    const target = event.currentTarget as HTMLFormElement | HTMLSelectElement;
    const form = target instanceof HTMLSelectElement ? target.form! : target;
    const data = new FormData(form);
    const chosen = String(data.get('when') ?? '');
    setWhen(chosen);
    const custom = chosen === CUSTOM;
    const from = custom ? fromTimeField(String(data.get('from') ?? '')) : '';
    const to = custom ? fromTimeField(String(data.get('to') ?? '')) : '';
    if (from === null || to === null) {
      setTimeError(`${from === null ? 'From' : 'To'} must be a time such as ${toTimeField(new Date().toISOString())}, in your local time.`);
      return;
    }
    setTimeError(null);
    setFilters({
      q: String(data.get('q') ?? '').trim(),
      state: String(data.get('state') ?? ''),
      agent: String(data.get('agent') ?? '').trim(),
      thread: filters.thread,
      within: WITHIN[chosen] ? chosen : '',
      from,
      to,
    });
  }
  function clear() {
    setFilters(noFilters());
    setWhen('');
    setTimeError(null);
    setFormKey((k) => k + 1);
  }
  const toggle = (id: string) =>
    setExpanded((open) => {
      const next = new Set(open);
      if (!next.delete(id)) next.add(id);
      return next;
    });
  const filtered = FILTERS.some((key) => filters[key]);
  // The recipients in view, or the one the list is filtered to, whose webhook is in trouble.
  const trouble = useWebhookTrouble(filters.agent ? [filters.agent] : view.items.map((d) => d.recipient));
  const agentTrouble = (filters.agent && trouble.find((t) => t.username === filters.agent)) || null;

  return html`
    <h1>Deliveries</h1>
    <details class="filter-box" open=${roomy}>
    <summary>Filters${filtered ? ' (on)' : ''}</summary>
    <form key=${formKey} class="filters" role="search" aria-label="Filter deliveries" onSubmit=${apply}>
      <div class="field wide">
        <label for="filter-q">Search</label>
        <input id="filter-q" name="q" type="search" defaultValue=${filters.q} placeholder="Id, agent name, or words of a title or message" />
      </div>
      <div class="field">
        <label for="filter-state">State</label>
        <select id="filter-state" name="state" value=${filters.state} onChange=${apply}>
          ${STATES.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
        </select>
      </div>
      <div class="field">
        <label for="filter-agent">Recipient</label>
        <input id="filter-agent" name="agent" defaultValue=${filters.agent} autocomplete="off" placeholder="username" />
      </div>
      <div class="field">
        <label for="filter-when">Accepted</label>
        <select id="filter-when" name="when" value=${when} onChange=${(event: Event) => {
          const chosen = (event.currentTarget as HTMLSelectElement).value;
          // A window applies at once; a range waits for its times.
          if (chosen === CUSTOM) setWhen(CUSTOM);
          else apply(event);
        }}>
          <option value="">Any time</option>
          ${Object.entries(WITHIN).map(([value, [label]]) => html`<option value=${value}>${label}</option>`)}
          <option value=${CUSTOM}>Between…</option>
        </select>
      </div>
      ${when === CUSTOM
        ? html`<div class="field">
            <label for="filter-from">From</label>
            <input id="filter-from" name="from" defaultValue=${toTimeField(filters.from)} placeholder="YYYY-MM-DD HH:MM" autocomplete="off"
              aria-describedby="time-hint time-error" aria-invalid=${timeError?.startsWith('From') ? 'true' : null} />
          </div>
          <div class="field">
            <label for="filter-to">To</label>
            <input id="filter-to" name="to" defaultValue=${toTimeField(filters.to)} placeholder="YYYY-MM-DD HH:MM" autocomplete="off"
              aria-describedby="time-hint time-error" aria-invalid=${timeError?.startsWith('To') ? 'true' : null} />
          </div>
          <p id="time-hint" class="hint time-hint">Local time; leave either empty for an open end.</p>`
        : null}
      <div class="buttons">
        <button type="submit">Apply</button>
        ${filtered ? html`<button type="button" class="quiet" onClick=${clear}>Clear filters</button>` : null}
      </div>
      <${ErrorText} id="time-error" error=${timeError} />
    </form>
    </details>
    ${filters.thread
      ? html`<p class="chip">Thread: <a href=${`/dashboard/threads/${filters.thread}`}>${threadTitle ?? filters.thread}</a>
          <button type="button" class="quiet" onClick=${() => setFilters({ ...filters, thread: '' })}>Show every thread</button></p>`
      : null}
    <${WebhookBanners} trouble=${trouble} />
    <${BulkResend} filters=${asked} agentTrouble=${agentTrouble} onDone=${list.refresh} />
    <h2 class="results">${view.status === 'ready'
      ? `${view.items.length}${view.next ? '+' : ''} ${filtered ? 'matching ' : ''}${view.items.length === 1 ? 'delivery' : 'deliveries'}, newest first`
      : 'Deliveries'}</h2>
    <p class="legend hint">Each recipient's delivery moves Accepted → Notified → Delivered → Fetched. Polling agents go straight from Accepted to Fetched.</p>
    <${ListState} view=${view} noun="deliveries" onRetry=${list.reset}
      empty=${filtered ? 'No deliveries match these filters.' : 'No deliveries yet: each message posted creates one per recipient, shown here as it moves.'} />
    <${WaitingButton} list=${list} label=${(n: number) => `${plural(n, 'new delivery', 'new deliveries')}`} />
    ${view.items.length > 0
      ? html`<table class="deliveries-table" ref=${list.box}>
          <caption class="sr">Deliveries, newest first</caption>
          <thead>
            <tr><th scope="col">Accepted</th><th scope="col">Message</th><th scope="col">Recipient</th><th scope="col">Progress</th><th scope="col">State</th><th scope="col"><span class="sr">Actions</span></th></tr>
          </thead>
          ${view.items.map((d) => html`<${DeliveryRows} key=${d.id} d=${d} open=${expanded.has(d.id)} departed=${view.departed.has(d.id)} onToggle=${() => toggle(d.id)} />`)}
        </table>`
      : null}
    <${MoreButton} list=${list} noun="deliveries" />
  `;
}
