// The dashboard's one script, a module. Lists are drawn with Preact (keyed, so a live update
// redraws only what changed and leaves an open attempt log open and typed text in place) through
// htm's tagged templates: no build step, nothing fetched from elsewhere. Everything shown is text
// content, never parsed as HTML, so names and errors cannot inject markup.
import { h, render } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import htm from 'htm';

const html = htm.bind(h);
const API = '/dashboard/api';
const PAGE = document.body.dataset.page;
// A list shows this many at first; a live refresh re-reads at most WINDOW (the server's bounds).
const PAGE_SIZE = 50;
const WINDOW = 500;
// A live change is shown at most this long after it is heard, however steady the traffic.
const REFRESH_WAIT_MS = 250;
const EXPIRED = 'Your session expired; sign in again.';

const $ = (selector) => document.querySelector(selector);

function toast(text, kind = 'ok') {
  const box = $('#toast');
  box.textContent = text;
  box.className = `show ${kind}`;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (box.className = ''), 5000);
}

const query = (params) => {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== '' && value !== null && value !== undefined) q.set(key, value);
  const text = q.toString();
  return text ? `?${text}` : '';
};

// --- Session --------------------------------------------------------------------------------

// Where "sign in again" leads: the sign-in page, and back here afterwards.
const signInHref = (ended) => `/dashboard/sign-in${query({ next: location.pathname + location.search, ended })}`;

function setLiveStatus(text, kind) {
  const badge = $('#live');
  if (!badge) return;
  badge.textContent = text;
  badge.className = `live ${kind}`;
}

let sessionOver = false;
// The session ended: say so and stop the live view, but keep the page as it is, so that nothing
// on it is lost; signing in again comes back to it.
function sessionEnded(sentence, ended = 'expired') {
  if (sessionOver) return;
  sessionOver = true;
  live.stop();
  setLiveStatus('Signed out', 'off');
  $('#session-ended-text').textContent = sentence;
  $('#sign-in-again').href = signInHref(ended);
  $('#session-ended').hidden = false;
}

// Every call sends the header the server requires on state changes and unwraps the envelope. A
// failure is an Error whose message is a sentence a person can act on. Paths are under the
// dashboard API unless given whole (the consent page's routes live under its own address).
async function api(method, path, body) {
  const init = { method, headers: { 'x-requested-with': 'fetch' }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path.startsWith('/dashboard/') ? path : API + path, init);
  } catch {
    throw new Error('Could not reach the service: check the connection, then try again.');
  }
  const payload = await res.json().catch(() => null);
  if (res.status === 401 && PAGE !== 'sign-in') {
    sessionEnded(EXPIRED);
    throw new Error(EXPIRED);
  }
  if (!payload || typeof payload.success !== 'boolean') {
    throw new Error(`The service answered HTTP ${res.status} without saying why; try again in a moment.`);
  }
  if (!payload.success) throw new Error(payload.error);
  return payload.data;
}

// --- Live -----------------------------------------------------------------------------------

// One event stream per page, whatever the page: delivery changes (with their fresh progress),
// thread and agent changes, and `ready` whenever the stream (re)opens, after which anything may
// have been missed. The server ends it with `session-ended` when the session ends.
const live = (() => {
  const listeners = new Set();
  let source = null;
  let retry = null;
  let stopped = false;
  const emit = (event) => listeners.forEach((listener) => listener(event));
  function connect() {
    if (stopped) return;
    source = new EventSource(`${API}/deliveries/events`);
    source.addEventListener('ready', () => {
      setLiveStatus('Live', 'on');
      emit({ type: 'ready' });
    });
    source.addEventListener('delivery', (event) => emit({ type: 'delivery', delivery: JSON.parse(event.data) }));
    source.addEventListener('thread', (event) => emit({ type: 'thread', ids: JSON.parse(event.data).ids }));
    source.addEventListener('agent', () => emit({ type: 'agent' }));
    source.addEventListener('session-ended', (event) => {
      const { error } = JSON.parse(event.data);
      sessionEnded(error, error.startsWith('You signed out') ? 'signed-out' : 'expired');
    });
    source.addEventListener('error', async () => {
      if (stopped) return;
      setLiveStatus('Reconnecting…', 'off');
      // The browser retries a dropped connection by itself, but gives up on a refused one: then a
      // 401 means the session ended while the stream was down; anything else is tried again.
      if (source.readyState !== EventSource.CLOSED) return;
      const res = await fetch(`${API}/me`, { credentials: 'same-origin' }).catch(() => null);
      if (res?.status === 401) sessionEnded(EXPIRED);
      else retry = setTimeout(connect, 2000);
    });
  }
  return {
    start: () => source || connect(),
    stop() {
      stopped = true;
      clearTimeout(retry);
      source?.close();
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
})();

function useLive(handler) {
  const latest = useRef(handler);
  latest.current = handler;
  useEffect(() => live.subscribe((event) => latest.current(event)), []);
}

// Runs `fn` at most `waitMs` after the first call, however many calls follow (a timer restarted on
// every call would never fire under steady traffic); a call made while it runs runs it once more.
function throttle(fn, waitMs) {
  let timer = null;
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

function useThrottled(fn, waitMs = REFRESH_WAIT_MS) {
  const latest = useRef(fn);
  latest.current = fn;
  return useMemo(() => throttle(() => latest.current(), waitMs), []);
}

// A call at `iso` (the server's word for when something changes by the passing of time alone, such
// as a delivery turning Stalled), not earlier than in half a second. Armed again whenever `seen`
// changes, so that a look that came too early (the clocks disagree) is followed by another.
function useTimeout(iso, fn, seen) {
  const latest = useRef(fn);
  latest.current = fn;
  useEffect(() => {
    if (!iso) return;
    const timer = setTimeout(() => latest.current(), Math.max(Date.parse(iso) - Date.now(), 500) + 100);
    return () => clearTimeout(timer);
  }, [iso, seen]);
}

// --- Lists ----------------------------------------------------------------------------------

// A list read a page at a time, newest first. `reset` reads the first page (filters changed);
// `refresh` reads again from the top down to the oldest entry shown (a live change), keeping the
// older pages loaded; `older` reads the next page. An answer for filters no longer shown is dropped.
function usePagedList(path, filters) {
  const [view, setView] = useState({ status: 'loading', items: [], next: null, error: null });
  const state = useRef({ gen: 0 });
  state.current.view = view;
  state.current.filters = filters;
  const read = (extra) => api('GET', `${path}${query({ ...state.current.filters, ...extra })}`);

  async function reset() {
    const gen = ++state.current.gen;
    setView({ status: 'loading', items: [], next: null, error: null });
    try {
      const page = await read({});
      if (gen === state.current.gen) setView({ status: 'ready', items: page.items, next: page.next, error: null });
    } catch (error) {
      if (gen === state.current.gen) setView({ status: 'error', items: [], next: null, error: error.message });
    }
  }

  async function refreshNow() {
    const gen = state.current.gen;
    const shown = state.current.view.items;
    const since = shown.length > PAGE_SIZE ? shown.at(-1).id : null;
    try {
      const page = await read(since ? { since, limit: WINDOW } : {});
      if (gen !== state.current.gen) return;
      setView((v) => ({ status: 'ready', items: page.items, next: since ? (page.next ?? v.next) : page.next, error: null }));
    } catch (error) {
      // An ended session is said once, at the top of the page.
      if (gen !== state.current.gen || sessionOver) return;
      setView((v) => (v.items.length > 0 ? { ...v, error: error.message } : { ...v, status: 'error', error: error.message }));
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
      setView((v) => ({ ...v, error: error.message }));
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
function ListState({ view, noun, empty, onRetry }) {
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

function MoreButton({ list, noun }) {
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

// --- Small pieces ---------------------------------------------------------------------------

const fullTime = (iso) => (iso ? new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }) : '');
function shortTime(iso) {
  const at = new Date(iso);
  return at.toDateString() === new Date().toDateString()
    ? at.toLocaleTimeString(undefined, { timeStyle: 'medium' })
    : at.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'short' });
}
const Time = ({ iso, short }) => html`<time datetime=${iso} title=${fullTime(iso)}>${short ? shortTime(iso) : fullTime(iso)}</time>`;

// A button's action with the button busy meanwhile; its failure is kept for showing next to it.
function useAction() {
  const [state, setState] = useState({ busy: false, error: null });
  async function run(action) {
    setState({ busy: true, error: null });
    try {
      const result = await action();
      setState({ busy: false, error: null });
      return result ?? true;
    } catch (error) {
      setState({ busy: false, error: error.message });
      return undefined;
    }
  }
  return [state, run];
}

const ErrorText = ({ id, error }) => html`<p id=${id} class="error" role="alert" hidden=${!error}>${error ?? ''}</p>`;

// The server's sentences start with the field they are about ("summary must be at most …").
const fieldOf = (error, names) => (error ? names.find((name) => error.startsWith(`${name} `)) ?? null : null);

function CopyButton({ text, label = 'Copy' }) {
  return html`<button type="button" class="quiet" onClick=${async () => {
    try {
      await navigator.clipboard.writeText(text());
      toast('Copied.');
    } catch {
      toast('Copying is not allowed here; select the text instead.', 'error');
    }
  }}>${label}</button>`;
}

// --- Header ---------------------------------------------------------------------------------

// What waits for a person, on every page: Failed, Retrying and Stalled deliveries and pending close
// requests, each a link to the list of them. Read again on every change (at most a few times a
// second) and when a Notified delivery is due to turn Stalled.
function Attention() {
  const [counts, setCounts] = useState(null);
  const load = async () => {
    try {
      setCounts(await api('GET', '/attention'));
    } catch {
      // The page's own lists say what went wrong; the counts stay as they were.
    }
  };
  const refresh = useThrottled(load, 400);
  useEffect(() => {
    load();
  }, []);
  useLive((event) => event.type !== 'agent' && refresh());
  useTimeout(counts?.nextStallAt, refresh, counts);
  if (!counts) return null;
  const items = [
    ['failed', 'Failed', counts.failed, '/dashboard/deliveries?state=failed', 'bad'],
    ['retrying', 'Retrying', counts.retrying, '/dashboard/deliveries?state=retrying', 'warn'],
    ['stalled', 'Stalled', counts.stalled, '/dashboard/deliveries?state=stalled', 'warn'],
    ['close-requests', 'Close requests', counts.closeRequests, '/dashboard/threads?state=close-pending', 'warn'],
  ];
  return html`<nav aria-label="Needs attention">
    <ul class="attention">
      ${items.map(([key, label, n, href, tone]) => html`<li key=${key}>
        <a href=${href} class=${`count ${n > 0 ? tone : 'none'}`} data-count=${key}>${label} <b>${n}</b></a>
      </li>`)}
    </ul>
  </nav>`;
}

async function startHeader() {
  $('#live').hidden = false;
  render(html`<${Attention} />`, $('#attention'));
  $('#sign-out').addEventListener('click', async (event) => {
    event.target.disabled = true;
    try {
      await api('POST', '/sign-out');
      location.href = '/dashboard/sign-in';
    } catch (error) {
      toast(error.message, 'error');
      event.target.disabled = false;
    }
  });
  try {
    const me = await api('GET', '/me');
    $('#me').textContent = me.username;
    $('.me').hidden = false;
  } catch {
    // Shown by the page: an expired session, or the service out of reach.
  }
}

// --- Sign in --------------------------------------------------------------------------------

// Back to the page the person came from, if it is a dashboard page.
function nextPage() {
  const next = new URLSearchParams(location.search).get('next') ?? '';
  return /^\/dashboard\/[^/\\]/.test(next) && !next.startsWith('/dashboard/sign-in') ? next : '/dashboard/deliveries';
}

function signInPage() {
  const codeForm = $('#code-form');
  const verifyForm = $('#verify-form');
  const error = $('#sign-in-error');
  const ended = new URLSearchParams(location.search).get('ended');
  if (ended) {
    const notice = $('#sign-in-notice');
    notice.textContent = ended === 'signed-out' ? 'You signed out; sign in again.' : EXPIRED;
    notice.hidden = false;
  }
  const fail = (input, message) => {
    error.textContent = message;
    input.setAttribute('aria-invalid', 'true');
  };
  codeForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    codeForm.email.removeAttribute('aria-invalid');
    try {
      const sent = await api('POST', '/sign-in/code', { email: codeForm.email.value });
      $('#code-sent').textContent = sent.message;
      codeForm.hidden = true;
      verifyForm.hidden = false;
      verifyForm.code.focus();
    } catch (e) {
      fail(codeForm.email, e.message);
    }
  });
  verifyForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    verifyForm.code.removeAttribute('aria-invalid');
    try {
      await api('POST', '/sign-in/verify', { email: codeForm.email.value, code: verifyForm.code.value });
      location.href = nextPage();
    } catch (e) {
      fail(verifyForm.code, e.message);
      verifyForm.code.select();
    }
  });
  $('#start-over').addEventListener('click', () => {
    verifyForm.hidden = true;
    codeForm.hidden = false;
    error.textContent = '';
    verifyForm.code.value = '';
    codeForm.email.focus();
  });
}

// --- Deliveries -----------------------------------------------------------------------------

const STEPS = [
  ['accepted', 'Accepted', 'createdAt'],
  ['notified', 'Notified', 'notifiedAt'],
  ['delivered', 'Delivered', 'deliveredAt'],
  ['fetched', 'Fetched', 'fetchedAt'],
];
const stepName = Object.fromEntries(STEPS.map(([key, label]) => [key, label]));
const STATES = [
  ['', 'Any state'],
  ['failed', 'Failed'],
  ['retrying', 'Retrying'],
  ['stalled', 'Stalled'],
  ['accepted', 'Accepted'],
  ['notified', 'Notified'],
  ['delivered', 'Delivered'],
  ['fetched', 'Fetched'],
];
const FILTERS = ['q', 'state', 'agent', 'thread', 'from', 'to'];

const stateOf = (d) => (d.step === 'failed' ? 'Failed' : d.stalled ? 'Stalled' : d.retrying ? 'Retrying' : stepName[d.step]);
const stateClass = (d) => `badge step-${d.step}${d.stalled ? ' stalled' : ''}${d.retrying ? ' retrying' : ''}`;

// A step is done when its time is recorded. A failed delivery shows a cross on the step after the
// one it reached; a polling delivery has no doorbell, so Notified and Delivered do not apply to it.
function Pipeline({ d, compact }) {
  const failedAt = d.step === 'failed' ? STEPS.findIndex(([key]) => key === d.failedStep) : -1;
  return html`<ol class=${compact ? 'pipeline compact' : 'pipeline'} aria-label="Progress">
    ${STEPS.map(([key, label, at], i) => {
      let state = d[at] ? 'done' : 'todo';
      if (!d.webhook && (key === 'notified' || key === 'delivered')) state = 'skipped';
      if (failedAt >= 0 && i === failedAt + 1) state = 'failed';
      if (d.stalled && key === 'delivered') state = 'stalled';
      const note = { done: '', todo: ' (not yet)', skipped: ' (not applicable: polling)', failed: ' (failed)', stalled: ' (stalled)' }[state];
      return html`<li key=${key} class=${state} title=${d[at] ? `${label}: ${fullTime(d[at])}` : `${label}${note}`}>
        <span class="dot" aria-hidden="true"></span><span class=${compact ? 'sr' : ''}>${label}</span><span class="sr">${note}</span>
      </li>`;
    })}
  </ol>`;
}

function Status({ d }) {
  if (d.step === 'failed') {
    return html`<p class="error">Failed at ${stepName[d.failedStep] ?? d.failedStep}${d.error ? `: ${d.error}` : ''}</p>`;
  }
  if (d.retrying) {
    return html`<p class="warn">
      Retrying: attempt ${d.attempts.at(-1)?.attempt ?? '?'} failed (${d.lastError ?? 'no answer'}); next attempt at <${Time} iso=${d.nextAttemptAt} />.
    </p>`;
  }
  if (d.stalled) return html`<p class="warn">Stalled: notified, but the handler never reported delivered.</p>`;
  return null;
}

// Which run an attempt belongs to: the original publish, a re-publish by the sweep, or a resend.
const attemptRun = (a) => (a.resend > 0 ? `Resend ${a.resend}` : a.publish > 1 ? `Re-publish ${a.publish}` : 'First publish');

function AttemptDetail({ a, payload }) {
  const headers = Object.entries(a.requestHeaders ?? {});
  return html`<details class="attempt-detail">
    <summary>Request and response</summary>
    <dl>
      <dt>Headers sent</dt>
      <dd>${headers.length === 0 ? 'None: nothing was sent.' : html`<pre>${headers.map(([k, v]) => `${k}: ${v}`).join('\n')}</pre>`}</dd>
      <dt>Payload sent</dt>
      <dd>${headers.length === 0 || !payload ? 'None.' : html`<pre>${payload}</pre>`}</dd>
      <dt>Response status</dt>
      <dd>${a.status ?? 'None: no answer.'}</dd>
      <dt>Response body (first KiB)</dt>
      <dd>${a.responseBody ? html`<pre>${a.responseBody}</pre>` : 'None.'}</dd>
    </dl>
  </details>`;
}

const ATTEMPT_COLUMNS = ['Time', 'Run', 'Attempt', 'Status', 'Duration', 'Error', 'Detail'];

function AttemptLog({ d }) {
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
          <td data-label=${time}><${Time} iso=${a.attemptedAt} /></td>
          <td data-label=${run}>${attemptRun(a)}</td>
          <td data-label=${attempt}>${a.attempt}</td>
          <td data-label=${status}>${a.status ?? '—'}</td>
          <td data-label=${duration}>${a.interrupted ? '—' : `${a.durationMs} ms`}</td>
          <td data-label=${error}>${a.error ?? ''}</td>
          <td data-label=${detail}><${AttemptDetail} a=${a} payload=${d.payload} /></td>
        </tr>`)}
      </tbody>
    </table>
  </details>`;
}

function ResendButton({ d }) {
  const [action, run] = useAction();
  if (d.step !== 'failed') return null;
  return html`<span class="resend">
    <button type="button" disabled=${action.busy} aria-describedby=${`resend-error-${d.id}`}
      onClick=${async () => {
        if (await run(() => api('POST', `/deliveries/${d.id}/resend`))) toast(`Resent to ${d.recipient}.`);
      }}>Resend</button>
    <${ErrorText} id=${`resend-error-${d.id}`} error=${action.error} />
  </span>`;
}

function DeliveryRows({ d, open, onToggle }) {
  const detailId = `detail-${d.id}`;
  return html`<tbody class=${`delivery step-${d.step}${d.stalled ? ' stalled' : ''}`} data-delivery=${d.id} data-step=${d.step} data-message=${d.messageId}>
    <tr>
      <td data-label="Accepted"><${Time} iso=${d.createdAt} short /></td>
      <td data-label="Message" class="message-cell">
        <span class="summary">${d.summary || '(no summary)'}</span>
        <span class="hint">${d.sender} in <a href=${`/dashboard/threads/${d.threadId}`}>${d.thread}</a></span>
      </td>
      <td data-label="Recipient">${d.recipient}${d.webhook ? '' : html` <span class="hint">(polling)</span>`}</td>
      <td data-label="Progress"><${Pipeline} d=${d} compact /></td>
      <td data-label="State">
        <span class=${stateClass(d)}>${stateOf(d)}</span>
        ${d.acknowledgedAt ? html` <span class="badge muted">Acknowledged</span>` : null}
      </td>
      <td class="actions">
        <button type="button" class="quiet" aria-expanded=${open ? 'true' : 'false'} aria-controls=${detailId} onClick=${onToggle}>
          ${open ? 'Hide' : 'Details'}<span class="sr"> of the delivery to ${d.recipient}</span>
        </button>
        <${ResendButton} d=${d} />
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

// datetime-local inputs speak local time without a zone; the address and the API speak UTC.
const toLocalInput = (iso) => {
  if (!iso) return '';
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? '' : new Date(at.getTime() - at.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};
const fromLocalInput = (value) => (value ? new Date(value).toISOString() : '');

function filtersFromAddress() {
  const params = new URLSearchParams(location.search);
  const filters = Object.fromEntries(FILTERS.map((key) => [key, params.get(key) ?? '']));
  // Links made before the state filter (?failed=true and the like) still open the view they meant.
  for (const state of ['failed', 'retrying', 'stalled']) if (!filters.state && params.get(state) === 'true') filters.state = state;
  return filters;
}

function BulkResend({ filters, onDone }) {
  const [state, setState] = useState({ busy: false, message: null, error: null });
  async function resend() {
    setState({ busy: true, message: null, error: null });
    try {
      const { failed, upTo } = await api('GET', `/deliveries/failed-in-view${query(filters)}`);
      if (failed === 0) return setState({ busy: false, message: 'No Failed deliveries in this view: nothing to resend.', error: null });
      const noun = failed === 1 ? 'delivery' : 'deliveries';
      if (!confirm(`Resend the ${failed} Failed ${noun} in this view? Each goes back to Accepted and its doorbell is rung again.`)) {
        return setState({ busy: false, message: null, error: null });
      }
      const done = await api('POST', '/deliveries/resend-failed', { ...filters, upTo });
      const refused = done.refused.map((r) => `${r.count} because ${r.reason}`).join('; ');
      setState({ busy: false, message: `Resent ${done.resent} of ${failed}.${refused ? ` Not resent: ${refused}.` : ''}`, error: null });
      onDone();
    } catch (error) {
      setState({ busy: false, message: null, error: error.message });
    }
  }
  return html`<div class="bulk">
    <button type="button" class="quiet" disabled=${state.busy} onClick=${resend}>Resend all Failed in this view…</button>
    <span class="hint" role="status">${state.message ?? ''}</span>
    <${ErrorText} id="bulk-error" error=${state.error} />
  </div>`;
}

function DeliveriesPage() {
  const [filters, setFilters] = useState(filtersFromAddress);
  const [formKey, setFormKey] = useState(0);
  const [expanded, setExpanded] = useState(() => new Set());
  // On a phone the filters start folded, so that the deliveries are what the screen shows first.
  const [roomy] = useState(() => matchMedia('(min-width: 601px)').matches);
  const [threadTitle, setThreadTitle] = useState(null);
  const list = usePagedList('/deliveries', filters);
  const { view } = list;

  useEffect(() => {
    history.replaceState(null, '', query(filters) || location.pathname);
    setThreadTitle(null);
    if (filters.thread) api('GET', `/threads/${filters.thread}`).then((t) => setThreadTitle(t.title), () => {});
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
  const nextStall = view.items.filter((d) => d.stallsAt && !d.stalled).map((d) => d.stallsAt).sort()[0];
  useTimeout(nextStall, list.refresh, view.items);

  function apply(event) {
    event.preventDefault?.();
    const form = event.currentTarget.form ?? event.currentTarget;
    const data = new FormData(form);
    setFilters({
      q: String(data.get('q') ?? '').trim(),
      state: String(data.get('state') ?? ''),
      agent: String(data.get('agent') ?? '').trim(),
      thread: filters.thread,
      from: fromLocalInput(String(data.get('from') ?? '')),
      to: fromLocalInput(String(data.get('to') ?? '')),
    });
  }
  function clear() {
    setFilters(Object.fromEntries(FILTERS.map((key) => [key, ''])));
    setFormKey((k) => k + 1);
  }
  const toggle = (id) =>
    setExpanded((open) => {
      const next = new Set(open);
      if (!next.delete(id)) next.add(id);
      return next;
    });
  const filtered = FILTERS.some((key) => filters[key]);

  return html`
    <h1>Deliveries</h1>
    <details class="filter-box" open=${roomy}>
    <summary>Filters${filtered ? ' (on)' : ''}</summary>
    <form key=${formKey} class="filters" role="search" aria-label="Filter deliveries" onSubmit=${apply}>
      <div class="field wide">
        <label for="filter-q">Search</label>
        <input id="filter-q" name="q" type="search" defaultValue=${filters.q} placeholder="Message, delivery or thread id, agent, title or text" />
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
        <label for="filter-from">From</label>
        <input id="filter-from" name="from" type="datetime-local" defaultValue=${toLocalInput(filters.from)} />
      </div>
      <div class="field">
        <label for="filter-to">To</label>
        <input id="filter-to" name="to" type="datetime-local" defaultValue=${toLocalInput(filters.to)} />
      </div>
      <div class="buttons">
        <button type="submit">Apply</button>
        ${filtered ? html`<button type="button" class="quiet" onClick=${clear}>Clear filters</button>` : null}
      </div>
    </form>
    </details>
    ${filters.thread
      ? html`<p class="chip">Thread: <a href=${`/dashboard/threads/${filters.thread}`}>${threadTitle ?? filters.thread}</a>
          <button type="button" class="quiet" onClick=${() => setFilters({ ...filters, thread: '' })}>Show every thread</button></p>`
      : null}
    <${BulkResend} filters=${filters} onDone=${list.refresh} />
    <h2 class="results">${view.status === 'ready'
      ? `${view.items.length}${view.next ? '+' : ''} ${filtered ? 'matching ' : ''}${view.items.length === 1 ? 'delivery' : 'deliveries'}, newest first`
      : 'Deliveries'}</h2>
    <p class="legend hint">Each recipient's delivery moves Accepted → Notified → Delivered → Fetched. Polling agents go straight from Accepted to Fetched.</p>
    <${ListState} view=${view} noun="deliveries" onRetry=${list.reset}
      empty=${filtered ? 'No deliveries match these filters.' : 'No deliveries yet: each message posted creates one per recipient, shown here as it moves.'} />
    ${view.items.length > 0
      ? html`<table class="deliveries-table">
          <caption class="sr">Deliveries, newest first</caption>
          <thead>
            <tr><th scope="col">Accepted</th><th scope="col">Message</th><th scope="col">Recipient</th><th scope="col">Progress</th><th scope="col">State</th><th scope="col"><span class="sr">Actions</span></th></tr>
          </thead>
          ${view.items.map((d) => html`<${DeliveryRows} key=${d.id} d=${d} open=${expanded.has(d.id)} onToggle=${() => toggle(d.id)} />`)}
        </table>`
      : null}
    <${MoreButton} list=${list} noun="deliveries" />
  `;
}

// --- Threads --------------------------------------------------------------------------------

const stateLabel = { open: 'Open', 'close-pending': 'Close requested', closed: 'Closed' };

function PostForm({ thread }) {
  const [action, run] = useAction();
  const [posted, setPosted] = useState(null);
  const field = fieldOf(action.error, ['content', 'summary']);
  const contentId = `post-${thread.id}`;
  const summaryId = `summary-${thread.id}`;
  const errorId = `post-error-${thread.id}`;
  async function submit(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const body = { content: form.content.value };
    if (form.summary.value.trim()) body.summary = form.summary.value;
    setPosted(null);
    const done = await run(() => api('POST', `/threads/${thread.id}/messages`, body));
    if (done) {
      const sentence = `Posted to ${done.recipients} recipient${done.recipients === 1 ? '' : 's'}.`;
      setPosted(sentence);
      toast(sentence);
      form.reset();
    }
  }
  // No maxlength: browsers count it in UTF-16 units, two per emoji, where the server counts
  // characters; the server's sentence names any bound that is passed, next to its field.
  return html`<form class="stack post" onSubmit=${submit}>
    <label for=${contentId}>Post as yourself</label>
    <textarea id=${contentId} name="content" rows="3" required aria-invalid=${field === 'content' ? 'true' : null}
      aria-describedby=${field === 'content' ? errorId : null}></textarea>
    ${field === 'content' ? html`<${ErrorText} id=${errorId} error=${action.error} />` : null}
    <label for=${summaryId}>Summary <span class="hint">(required above 200 characters)</span></label>
    <input id=${summaryId} name="summary" aria-invalid=${field === 'summary' ? 'true' : null} aria-describedby=${field === 'summary' ? errorId : null} />
    ${field === 'summary' ? html`<${ErrorText} id=${errorId} error=${action.error} />` : null}
    <div class="inline">
      <button type="submit" disabled=${action.busy}>Post</button>
      <span class="hint" role="status">${posted ?? ''}</span>
    </div>
    ${field === null ? html`<${ErrorText} id=${errorId} error=${action.error} />` : null}
  </form>`;
}

function Participants({ thread }) {
  const [action, run] = useAction();
  return html`<div class="participants-box">
    <ul class="participants" aria-label=${`Participants of ${thread.title}`}>
      ${thread.participants.map((p) => html`<li key=${p.username}>
        <span>${p.username}</span>
        ${thread.state === 'closed'
          ? null
          : html`<button type="button" class="quiet danger" disabled=${action.busy} aria-label=${`Remove ${p.username} from ${thread.title}`}
              onClick=${async () => {
                if (!confirm(`Remove ${p.username}? It loses the thread and everything in it.`)) return;
                if (await run(() => api('DELETE', `/threads/${thread.id}/participants/${encodeURIComponent(p.username)}`))) toast(`${p.username} removed.`);
              }}>Remove</button>`}
      </li>`)}
    </ul>
    <${ErrorText} id=${`participants-error-${thread.id}`} error=${action.error} />
  </div>`;
}

function Decision({ thread }) {
  const [action, run] = useAction();
  if (thread.state !== 'close-pending') return null;
  return html`<div class="decision notice">
    <p>${thread.openedBy} asked to close this thread.</p>
    <button type="button" disabled=${action.busy} onClick=${async () => {
      if (await run(() => api('POST', `/threads/${thread.id}/confirm-close`))) toast('Thread closed.');
    }}>Confirm close</button>
    ${' '}
    <button type="button" class="quiet" disabled=${action.busy} onClick=${async () => {
      if (await run(() => api('POST', `/threads/${thread.id}/decline-close`))) toast('Close declined; the thread is open again.');
    }}>Decline</button>
    <${ErrorText} id=${`decision-error-${thread.id}`} error=${action.error} />
  </div>`;
}

// On the Threads page a thread is a card under the list's heading; on its own page, the page.
function ThreadBody({ thread, level }) {
  const Heading = `h${level}`;
  return html`
    ${thread.goal ? html`<p class="goal">${thread.goal}</p>` : null}
    <p class="hint">Opened by ${thread.openedBy} · <${Time} iso=${thread.createdAt} /> · <a href=${`/dashboard/deliveries?thread=${thread.id}`}>Delivery progress</a></p>
    <${Decision} thread=${thread} />
    <${Heading}>Participants<//>
    <${Participants} thread=${thread} />
    ${thread.state === 'open' ? html`<${PostForm} thread=${thread} />` : null}
  `;
}

function ThreadCard({ thread }) {
  return html`<li class="card thread" data-thread=${thread.id}>
    <div class="card-head">
      <h3><a href=${`/dashboard/threads/${thread.id}`}>${thread.title}</a></h3>
      <span class=${`badge state-${thread.state}`}>${stateLabel[thread.state]}</span>
    </div>
    <${ThreadBody} thread=${thread} level=${4} />
  </li>`;
}

function ThreadsPage() {
  const params = new URLSearchParams(location.search);
  const [filters, setFilters] = useState({ state: params.get('state') ?? '', q: params.get('q') ?? '' });
  const list = usePagedList('/threads', filters);
  useEffect(() => history.replaceState(null, '', query(filters) || location.pathname), [JSON.stringify(filters)]);
  useLive((event) => (event.type === 'thread' || event.type === 'ready') && list.refresh());
  function apply(event) {
    event.preventDefault?.();
    const data = new FormData(event.currentTarget.form ?? event.currentTarget);
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
          <option value="open">Open</option>
          <option value="close-pending">Close requested</option>
          <option value="closed">Closed</option>
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

function RecipientBadges({ message }) {
  return html`<ul class="recipients" aria-label="Deliveries">
    ${message.deliveries.map((d) => html`<li key=${d.deliveryId}>
      <a href=${`/dashboard/deliveries?q=${d.deliveryId}`}>${d.recipient}</a>
      ${' '}<span class=${stateClass(d)}>${stateOf(d)}</span>
    </li>`)}
  </ul>`;
}

function ThreadPage() {
  const threadId = decodeURIComponent(location.pathname.split('/').pop());
  const [thread, setThread] = useState({ status: 'loading', record: null, error: null });
  const messages = usePagedList(`/threads/${threadId}/messages`, {});
  const loadThread = async () => {
    try {
      const record = await api('GET', `/threads/${threadId}`);
      setThread({ status: 'ready', record, error: null });
      document.title = `${record.title} · Agent Messaging Service`;
    } catch (error) {
      setThread((t) => ({ ...t, status: t.record ? 'ready' : 'error', error: error.message }));
    }
  };
  const refreshThread = useThrottled(loadThread);
  useEffect(() => {
    loadThread();
  }, []);
  useLive((event) => {
    if (event.type === 'ready') {
      refreshThread();
      messages.refresh();
    } else if (event.type === 'thread' && event.ids.includes(threadId)) refreshThread();
    else if (event.type === 'delivery' && event.delivery.threadId === threadId) messages.refresh();
  });
  const t = thread.record;
  return html`
    <p><a href="/dashboard/threads">All threads</a></p>
    ${t
      ? html`<div class="card thread" data-thread=${t.id}>
          <div class="card-head">
            <h1>${t.title}</h1>
            <span class=${`badge state-${t.state}`}>${stateLabel[t.state]}</span>
          </div>
          ${thread.error ? html`<p class="notice problem" role="alert">Could not refresh the thread: ${thread.error}</p>` : null}
          <${ThreadBody} thread=${t} level=${2} />
        </div>`
      : html`<h1>Thread</h1>
          ${thread.status === 'loading'
            ? html`<p class="hint placeholder" role="status">Loading the thread…</p>`
            : html`<div class="notice problem" role="alert"><p>Could not load the thread: ${thread.error}</p>
                <button type="button" onClick=${loadThread}>Try again</button></div>`}`}
    <h2>Messages</h2>
    <${ListState} view=${messages.view} noun="messages" onRetry=${messages.reset} empty="No messages in this thread yet." />
    <ol class="cards messages">
      ${messages.view.items.map((m) => html`<li key=${m.id} class="card message" data-message=${m.id}>
        <div class="card-head">
          <h3>${m.sender}</h3>
          <span class="hint"><${Time} iso=${m.createdAt} /></span>
        </div>
        ${m.summary ? html`<p class="hint">Summary: ${m.summary}</p>` : null}
        <p class="content">${m.content}</p>
        <${RecipientBadges} message=${m} />
      </li>`)}
    </ol>
    <${MoreButton} list=${messages} noun="messages" />
  `;
}

// --- Agents ---------------------------------------------------------------------------------

function AddWebhook({ agent, onSecret }) {
  const [action, run] = useAction();
  const id = `hook-${agent.username}`;
  const errorId = `hook-error-${agent.username}`;
  async function submit(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const added = await run(() => api('PUT', `/agents/${encodeURIComponent(agent.username)}/webhook`, { webhookUrl: form.webhookUrl.value }));
    if (added) {
      onSecret(added.signingSecret);
      toast('Webhook added; its signing secret is shown below.');
    }
  }
  return html`<form class="inline" onSubmit=${submit}>
    <div class="field">
      <label for=${id}>Webhook URL</label>
      <input id=${id} name="webhookUrl" type="url" required placeholder="https://…" aria-invalid=${action.error ? 'true' : null} aria-describedby=${errorId} />
      <${ErrorText} id=${errorId} error=${action.error} />
    </div>
    <button type="submit" disabled=${action.busy}>Add webhook</button>
  </form>`;
}

function Webhook({ agent, secret, onSecret }) {
  const [action, run] = useAction();
  if (!agent.webhookUrl) return html`<${AddWebhook} agent=${agent} onSecret=${onSecret} />`;
  const name = encodeURIComponent(agent.username);
  return html`<div class="webhook">
    <p>Webhook: <code class="url">${agent.webhookUrl}</code></p>
    <p class="secret">Signing secret: ${secret ? html`<code>${secret}</code> <${CopyButton} text=${() => secret} />` : html`<code class="masked">••••••••••••••••</code> <button type="button" class="quiet" disabled=${action.busy}
        onClick=${async () => {
          const shown = await run(() => api('GET', `/agents/${name}/webhook/secret`));
          if (shown) onSecret(shown.signingSecret);
        }}>Reveal secret</button>`}</p>
    <p><button type="button" class="danger" disabled=${action.busy} onClick=${async () => {
      if (!confirm(`Remove the webhook of ${agent.username}? Its signing secret is discarded for good.`)) return;
      if (await run(() => api('DELETE', `/agents/${name}/webhook`))) {
        onSecret(null);
        toast('Webhook removed.');
      }
    }}>Remove webhook</button></p>
    <${ErrorText} id=${`webhook-error-${agent.username}`} error=${action.error} />
  </div>`;
}

// The MCP clients connected over OAuth to act as this agent; Disconnect ends one at once (its
// tokens stop working at the next call). The list comes with the agent and is redrawn on the live
// `agent` event that a connection's change sends.
function Connections({ agent }) {
  const [action, run] = useAction();
  if (agent.connections.length === 0) return html`<p class="hint">No connected clients.</p>`;
  return html`<div class="connections">
    <h4>Connected clients</h4>
    <ul>
      ${agent.connections.map((c) => {
        const name = c.clientName ?? c.clientId;
        return html`<li key=${c.grantId} class="connection">
          <span class="client">${name}</span>
          <span class="hint">Approved${c.approvedBy ? ` by ${c.approvedBy}` : ''} <${Time} iso=${c.approvedAt} short />${' · '}${c.lastUsedAt
            ? html`last used <${Time} iso=${c.lastUsedAt} short />`
            : 'never used'}</span>
          <button type="button" class="quiet danger" disabled=${action.busy} onClick=${async () => {
            if (!confirm(`Disconnect ${name} from ${agent.username}? It stops working at once; connecting again needs a new approval.`)) return;
            if (await run(() => api('DELETE', `/connections/${encodeURIComponent(c.grantId)}`))) toast(`${name} disconnected.`);
          }}>Disconnect</button>
        </li>`;
      })}
    </ul>
    <${ErrorText} id=${`connections-error-${agent.username}`} error=${action.error} />
  </div>`;
}

function AgentCard({ agent, secret, onSecret }) {
  const [action, run] = useAction();
  const verb = agent.archived ? 'unarchive' : 'archive';
  return html`<li class=${`card agent${agent.archived ? ' archived' : ''}`} data-agent=${agent.username}>
    <div class="card-head">
      <h3>${agent.username}</h3>
      <span class=${`badge ${agent.archived ? 'muted' : 'good'}`}>${agent.archived ? 'Archived' : 'Active'}</span>
      <span class="badge">${agent.webhookUrl ? 'Webhook' : 'Polling'}</span>
    </div>
    <p class="hint">Registered <${Time} iso=${agent.createdAt} /> · <a href=${`/dashboard/deliveries?agent=${encodeURIComponent(agent.username)}`}>Deliveries</a></p>
    <${Webhook} agent=${agent} secret=${secret} onSecret=${onSecret} />
    <${Connections} agent=${agent} />
    <p>
      <button type="button" class=${agent.archived ? '' : 'danger'} disabled=${action.busy} onClick=${async () => {
        if (await run(() => api('POST', `/agents/${encodeURIComponent(agent.username)}/${verb}`))) toast(`${agent.username} ${verb}d.`);
      }}>${agent.archived ? 'Unarchive' : 'Archive'}</button>
    </p>
    <${ErrorText} id=${`agent-error-${agent.username}`} error=${action.error} />
  </li>`;
}

function RegisterForm({ onCreated }) {
  const [action, run] = useAction();
  const field = fieldOf(action.error, ['username', 'webhookUrl']);
  async function submit(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const created = await run(() => api('POST', '/agents', { username: form.username.value, webhookUrl: form.webhookUrl.value || undefined }));
    if (created) {
      form.reset();
      onCreated(created);
    }
  }
  const describe = (name, hint) => [hint, field === name || (name === 'username' && action.error && !field) ? 'register-error' : null].filter(Boolean).join(' ') || null;
  return html`<form class="inline" onSubmit=${submit}>
    <div class="field">
      <label for="new-username">Username</label>
      <input id="new-username" name="username" required maxlength="64" pattern="[a-z0-9][a-z0-9_.\\-]*" autocomplete="off"
        aria-invalid=${field === 'username' || (action.error && !field) ? 'true' : null} aria-describedby=${describe('username', 'username-hint')} />
      <small id="username-hint">Lowercase letters, digits, “.”, “_” or “-”.</small>
      ${field !== 'webhookUrl' ? html`<${ErrorText} id="register-error" error=${action.error} />` : null}
    </div>
    <div class="field">
      <label for="new-webhook">Webhook URL <span class="hint">(optional)</span></label>
      <input id="new-webhook" name="webhookUrl" type="url" placeholder="https://example.com/hooks/agent"
        aria-invalid=${field === 'webhookUrl' ? 'true' : null} aria-describedby=${describe('webhookUrl', null)} />
      ${field === 'webhookUrl' ? html`<${ErrorText} id="register-error" error=${action.error} />` : null}
    </div>
    <button type="submit" disabled=${action.busy}>Register</button>
  </form>`;
}

function NewKey({ created }) {
  const box = useRef(null);
  useEffect(() => box.current?.focus(), [created]);
  return html`<div id="new-key" class="notice" tabindex="-1" ref=${box}>
    <p>API key for <strong id="new-key-agent">${created.username}</strong>. Copy it now: it is shown only once.</p>
    <p class="secret"><code id="new-key-value">${created.apiKey}</code> <${CopyButton} text=${() => created.apiKey} /></p>
    ${created.signingSecret
      ? html`<p>Signing secret: <code id="new-key-secret">${created.signingSecret}</code> <${CopyButton} text=${() => created.signingSecret} /></p>`
      : null}
  </div>`;
}

function AgentsPage() {
  const [filters, setFilters] = useState({ q: new URLSearchParams(location.search).get('q') ?? '' });
  const [created, setCreated] = useState(null);
  const [secrets, setSecrets] = useState({});
  const list = usePagedList('/agents', filters);
  useEffect(() => history.replaceState(null, '', query(filters) || location.pathname), [filters.q]);
  useLive((event) => (event.type === 'agent' || event.type === 'ready') && list.refresh());
  return html`
    <h1>Agents</h1>
    <section class="card" aria-labelledby="register-heading">
      <h2 id="register-heading">Register an agent</h2>
      <${RegisterForm} onCreated=${(agent) => {
        setCreated(agent);
        if (agent.signingSecret) setSecrets((s) => ({ ...s, [agent.username]: agent.signingSecret }));
        list.refresh();
      }} />
      ${created ? html`<${NewKey} created=${created} />` : null}
    </section>
    <section aria-labelledby="list-heading">
      <h2 id="list-heading">All agents</h2>
      <form class="filters" role="search" aria-label="Find agents" onSubmit=${(event) => {
        event.preventDefault();
        setFilters({ q: event.currentTarget.q.value.trim() });
      }}>
        <div class="field wide">
          <label for="agents-q">Name contains</label>
          <input id="agents-q" name="q" type="search" defaultValue=${filters.q} />
        </div>
        <div class="buttons"><button type="submit">Find</button></div>
      </form>
      <${ListState} view=${list.view} noun="agents" onRetry=${list.reset} empty=${filters.q ? 'No agent name contains that.' : 'No agents yet: register the first above.'} />
      <ul class="cards">
        ${list.view.items.map((a) => html`<${AgentCard} key=${a.username} agent=${a} secret=${secrets[a.username] ?? null}
          onSecret=${(secret) => setSecrets((s) => ({ ...s, [a.username]: secret }))} />`)}
      </ul>
      <${MoreButton} list=${list} noun="agents" />
    </section>
  `;
}

// --- Connecting a client (OAuth) -----------------------------------------------------------

const hostOf = (url) => {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
};

// An MCP client asks to act as one of the agents (src/oauth). The person sees who asks and, most
// plainly, where the browser goes back to (a lookalike shows there), picks the agent, and approves
// or denies; the answer is the address to continue at. The request is read from and decided at
// this page's own address, where the server ties it to the browser that started it.
function AuthorizePage() {
  const here = location.pathname.replace(/\/+$/, '');
  const [view, setView] = useState({ status: 'loading', request: null, error: null });
  const [agent, setAgent] = useState('');
  const [unchosen, setUnchosen] = useState(false);
  const [action, run] = useAction();
  async function load() {
    setView({ status: 'loading', request: null, error: null });
    try {
      setView({ status: 'ready', request: await api('GET', `${here}/request`), error: null });
    } catch (error) {
      setView({ status: 'error', request: null, error: error.message });
    }
  }
  useEffect(() => void load(), []);
  if (view.status === 'loading') return html`<h1>Connect a client</h1><p class="hint placeholder" role="status">Loading the request…</p>`;
  if (view.status === 'error') {
    return html`<h1>Connect a client</h1>
      <div class="notice problem" role="alert"><p>${view.error}</p><button type="button" onClick=${load}>Try again</button></div>`;
  }
  const { client, resource, agents } = view.request;
  const name = client.name ?? 'an unnamed client';
  const agentError = unchosen ? 'Choose the agent the client will act as.' : action.error?.startsWith('agent: ') ? action.error.slice(7) : null;
  const otherError = action.error && !action.error.startsWith('agent: ') ? action.error : null;
  async function decide(decision) {
    if (decision === 'approve' && !agent) return setUnchosen(true);
    const decided = await run(() => api('POST', `${here}/decision`, decision === 'approve' ? { decision, agent } : { decision }));
    if (decided) location.assign(decided.redirectTo);
  }
  return html`
    <h1>Connect ${name}</h1>
    <section class="card consent" aria-label="Authorization request">
      <p><strong>${name}</strong> asks to act as one of your agents. It will read and send that agent's messages over MCP
        at <code>${resource}</code> until someone disconnects it on the Agents page.</p>
      <dl class="facts">
        <dt>After you decide, you return to</dt>
        <dd><strong class="return-host">${hostOf(client.redirectUri)}</strong> <code class="url">${client.redirectUri}</code></dd>
        ${client.uri ? html`<dt>Client website</dt><dd><code class="url">${client.uri}</code></dd>` : null}
        ${client.metadataDocument
          ? html`<dt>Client published by</dt>
              <dd><strong class="return-host">${hostOf(client.clientId)}</strong> <code class="url">${client.clientId}</code></dd>`
          : html`<dt>Client id</dt>
              <dd><code class="small">${client.clientId}</code></dd>`}
      </dl>
      <form class="stack" onSubmit=${(event) => {
        event.preventDefault();
        decide('approve');
      }}>
        <fieldset class="choices" aria-describedby="agent-error" aria-invalid=${agentError ? 'true' : null}>
          <legend>Act as</legend>
          ${agents.length === 0
            ? html`<p class="hint">There is no active agent to choose. Register one on the <a href="/dashboard/agents">Agents page</a>,
                then connect again from the client; or deny this request.</p>`
            : agents.map((a) => html`<label class="check" key=${a}>
                <input type="radio" name="agent" value=${a} checked=${agent === a} onChange=${() => {
                  setAgent(a);
                  setUnchosen(false);
                }} /> ${a}
              </label>`)}
        </fieldset>
        <${ErrorText} id="agent-error" error=${agentError} />
        <div class="buttons">
          <button type="submit" disabled=${action.busy || agents.length === 0}>Approve</button>
          <button type="button" class="quiet" disabled=${action.busy} onClick=${() => decide('deny')}>Deny</button>
        </div>
        <${ErrorText} id="decision-error" error=${otherError} />
      </form>
    </section>
  `;
}

// --- Start ----------------------------------------------------------------------------------

const pages = { deliveries: DeliveriesPage, threads: ThreadsPage, thread: ThreadPage, agents: AgentsPage, authorize: AuthorizePage };
if (PAGE === 'sign-in') signInPage();
else {
  startHeader();
  const app = $('#app');
  app.textContent = '';
  render(html`<${pages[PAGE]} />`, app);
  // The live view starts whatever the first loads answered: a list that failed to load is read
  // again when the stream is ready.
  live.start();
}
