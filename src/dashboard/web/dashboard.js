// The dashboard's one script: plain DOM, no framework, nothing fetched from elsewhere. Everything
// shown is built with textContent, never parsed as HTML, so names and errors cannot inject markup.
'use strict';

const API = '/dashboard/api';

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const $ = (selector) => document.querySelector(selector);

function toast(text, kind = 'info') {
  const box = $('#toast');
  box.textContent = text;
  box.className = `show ${kind}`;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (box.className = ''), 5000);
}

// Every call sends the header the server requires on state changes, and unwraps the envelope.
async function api(method, path, body) {
  const init = { method, headers: { 'x-requested-with': 'fetch' }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(API + path, init);
  const payload = await res.json().catch(() => ({ success: false, error: `Unexpected answer (${res.status}).` }));
  if (res.status === 401 && document.body.dataset.page !== 'sign-in') {
    location.href = '/dashboard/sign-in';
    throw new Error(payload.error);
  }
  if (!payload.success) throw new Error(payload.error);
  return payload.data;
}

// Runs a button's action with the button disabled, reporting failures in the toast.
async function act(button, action, done) {
  button.disabled = true;
  try {
    const result = await action();
    if (done) toast(done, 'ok');
    return result;
  } catch (error) {
    toast(error.message, 'error');
  } finally {
    button.disabled = false;
  }
}

const time = (iso) => (iso ? new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' }) : '');
const timeEl = (iso) => h('time', { datetime: iso }, time(iso));

function copyButton(getText, label = 'Copy') {
  return h('button', {
    type: 'button',
    class: 'quiet',
    onclick: async (event) => {
      try {
        await navigator.clipboard.writeText(getText());
        toast('Copied.', 'ok');
      } catch {
        toast('Copying is not allowed here; select the text instead.', 'error');
      }
      event.target.focus();
    },
  }, label);
}

async function startHeader() {
  const box = $('.me');
  if (!box) return;
  const me = await api('GET', '/me');
  $('#me').textContent = me.username;
  box.hidden = false;
  $('#sign-out').addEventListener('click', async (event) => {
    await act(event.target, () => api('POST', '/sign-out'));
    location.href = '/dashboard/sign-in';
  });
  document.querySelectorAll('[data-copy]').forEach((button) =>
    button.replaceWith(copyButton(() => document.getElementById(button.dataset.copy).textContent)),
  );
}

// --- Sign in -------------------------------------------------------------------------------

function signInPage() {
  const codeForm = $('#code-form');
  const verifyForm = $('#verify-form');
  const error = $('#sign-in-error');
  codeForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    try {
      const sent = await api('POST', '/sign-in/code', { email: codeForm.email.value });
      $('#code-sent').textContent = sent.message;
      codeForm.hidden = true;
      verifyForm.hidden = false;
      verifyForm.code.focus();
    } catch (e) {
      error.textContent = e.message;
    }
  });
  verifyForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    try {
      await api('POST', '/sign-in/verify', { email: codeForm.email.value, code: verifyForm.code.value });
      location.href = '/dashboard/deliveries';
    } catch (e) {
      error.textContent = e.message;
      verifyForm.code.select();
    }
  });
  $('#start-over').addEventListener('click', () => {
    verifyForm.hidden = true;
    codeForm.hidden = false;
    verifyForm.code.value = '';
    codeForm.email.focus();
  });
}

// --- Agents --------------------------------------------------------------------------------

function webhookControls(agent, reload) {
  if (!agent.webhookUrl) {
    const input = h('input', { type: 'url', name: 'webhookUrl', required: true, id: `hook-${agent.username}`, placeholder: 'https://…' });
    return h('form', {
      class: 'inline',
      onsubmit: async (event) => {
        event.preventDefault();
        const added = await act(event.submitter, () => api('PUT', `/agents/${encodeURIComponent(agent.username)}/webhook`, { webhookUrl: input.value }), 'Webhook added; its signing secret is shown below.');
        if (added) await reload(agent.username, added.signingSecret);
      },
    }, h('div', { class: 'field' }, h('label', { for: input.id }, 'Webhook URL'), input), h('button', { type: 'submit' }, 'Add webhook'));
  }
  const secret = h('code', { class: 'masked' }, '••••••••••••••••');
  const reveal = h('button', {
    type: 'button',
    class: 'quiet',
    'aria-expanded': 'false',
    onclick: async (event) => {
      const shown = await act(event.target, () => api('GET', `/agents/${encodeURIComponent(agent.username)}/webhook/secret`));
      if (!shown) return;
      secret.textContent = shown.signingSecret;
      secret.className = '';
      event.target.replaceWith(copyButton(() => shown.signingSecret));
    },
  }, 'Reveal secret');
  const remove = h('button', {
    type: 'button',
    class: 'danger',
    onclick: async (event) => {
      if (!confirm(`Remove the webhook of ${agent.username}? Its signing secret is discarded for good.`)) return;
      if (await act(event.target, () => api('DELETE', `/agents/${encodeURIComponent(agent.username)}/webhook`), 'Webhook removed.')) await reload();
    },
  }, 'Remove webhook');
  return h('div', { class: 'webhook' },
    h('p', {}, 'Webhook: ', h('code', { class: 'url' }, agent.webhookUrl)),
    h('p', { class: 'secret' }, 'Signing secret: ', secret, ' ', reveal),
    h('p', {}, remove));
}

function agentCard(agent, reload, freshSecret) {
  const toggle = h('button', {
    type: 'button',
    class: agent.archived ? '' : 'danger',
    onclick: async (event) => {
      const verb = agent.archived ? 'unarchive' : 'archive';
      if (await act(event.target, () => api('POST', `/agents/${encodeURIComponent(agent.username)}/${verb}`), `${agent.username} ${verb}d.`)) await reload();
    },
  }, agent.archived ? 'Unarchive' : 'Archive');
  const card = h('li', { class: `card agent${agent.archived ? ' archived' : ''}`, dataset: { agent: agent.username } },
    h('div', { class: 'card-head' },
      h('h3', {}, agent.username),
      h('span', { class: `badge ${agent.archived ? 'muted' : 'good'}` }, agent.archived ? 'Archived' : 'Active'),
      h('span', { class: 'badge' }, agent.webhookUrl ? 'Webhook' : 'Polling')),
    h('p', { class: 'hint' }, 'Registered ', timeEl(agent.createdAt)),
    webhookControls(agent, reload),
    h('p', {}, toggle));
  if (freshSecret) {
    const secret = card.querySelector('.secret code');
    secret.textContent = freshSecret;
    secret.className = '';
  }
  return card;
}

// A list shown a page at a time: the first page on (re)load, the next one appended by the
// "Show more" button, which is there only while the server has more.
function pagedList(list, more, path, card) {
  let next = null;
  const show = async (first) => {
    const page = await api('GET', first ? path : `${path}?after=${encodeURIComponent(next)}`);
    const cards = page.items.map(card);
    if (first) list.replaceChildren(...cards);
    else list.append(...cards);
    next = page.next;
    more.hidden = next === null;
    return page;
  };
  more.addEventListener('click', () => act(more, () => show(false)));
  return () => show(true);
}

function agentsPage() {
  const list = $('#agents');
  let fresh = { username: null, secret: null };
  const firstPage = pagedList(list, $('#agents-more'), '/agents', (a) =>
    agentCard(a, reload, a.username === fresh.username ? fresh.secret : null),
  );
  async function reload(username, freshSecret) {
    fresh = { username, secret: freshSecret };
    const page = await firstPage();
    $('#agents-empty').hidden = page.items.length > 0;
  }
  const form = $('#create-agent');
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const created = await act(event.submitter, () => api('POST', '/agents', { username: form.username.value, webhookUrl: form.webhookUrl.value || undefined }));
    if (!created) return;
    $('#new-key-agent').textContent = created.username;
    $('#new-key-value').textContent = created.apiKey;
    $('#new-key-secret-line').hidden = !created.signingSecret;
    $('#new-key-secret').textContent = created.signingSecret ?? '';
    const notice = $('#new-key');
    notice.hidden = false;
    notice.focus();
    form.reset();
    await reload();
  });
  reload();
}

// --- Threads -------------------------------------------------------------------------------

const stateLabel = { open: 'Open', 'close-pending': 'Close requested', closed: 'Closed' };

function threadCard(thread, reload) {
  const path = `/threads/${thread.id}`;
  const participants = h('ul', { class: 'participants', 'aria-label': `Participants of ${thread.title}` },
    thread.participants.map((p) => h('li', {},
      h('span', {}, p.username),
      thread.state === 'closed' ? null : h('button', {
        type: 'button',
        class: 'quiet danger',
        'aria-label': `Remove ${p.username} from ${thread.title}`,
        onclick: async (event) => {
          if (!confirm(`Remove ${p.username}? It loses the thread and everything in it.`)) return;
          if (await act(event.target, () => api('DELETE', `${path}/participants/${encodeURIComponent(p.username)}`), `${p.username} removed.`)) await reload();
        },
      }, 'Remove'))));
  const decision = thread.state !== 'close-pending' ? null : h('div', { class: 'decision notice' },
    h('p', {}, `${thread.openedBy} asked to close this thread.`),
    h('button', {
      type: 'button',
      onclick: async (event) => {
        if (await act(event.target, () => api('POST', `${path}/confirm-close`), 'Thread closed.')) await reload();
      },
    }, 'Confirm close'),
    ' ',
    h('button', {
      type: 'button',
      class: 'quiet',
      onclick: async (event) => {
        if (await act(event.target, () => api('POST', `${path}/decline-close`), 'Close declined; the thread is open again.')) await reload();
      },
    }, 'Decline'));
  const contentId = `post-${thread.id}`;
  const summaryId = `summary-${thread.id}`;
  const post = thread.state !== 'open' ? null : h('form', {
    class: 'stack post',
    onsubmit: async (event) => {
      event.preventDefault();
      const form = event.target;
      const body = { content: form.content.value };
      if (form.summary.value.trim()) body.summary = form.summary.value;
      const posted = await act(event.submitter, () => api('POST', `${path}/messages`, body));
      if (posted) {
        toast(`Posted to ${posted.recipients} recipient${posted.recipients === 1 ? '' : 's'}.`, 'ok');
        form.reset();
      }
    },
  },
  // No maxlength: browsers count it in UTF-16 units, two per emoji, where the server counts
  // characters; the server's sentence names any bound that is passed.
  h('label', { for: contentId }, 'Post as yourself'),
  h('textarea', { id: contentId, name: 'content', rows: 3, required: true }),
  h('label', { for: summaryId }, 'Summary ', h('span', { class: 'hint' }, '(required above 200 characters)')),
  h('input', { id: summaryId, name: 'summary' }),
  h('button', { type: 'submit' }, 'Post'));
  return h('li', { class: 'card thread', dataset: { thread: thread.id } },
    h('div', { class: 'card-head' },
      h('h3', {}, thread.title),
      h('span', { class: `badge state-${thread.state}` }, stateLabel[thread.state])),
    thread.goal ? h('p', {}, thread.goal) : null,
    h('p', { class: 'hint' }, `Opened by ${thread.openedBy} · `, timeEl(thread.createdAt), ' · ',
      h('a', { href: `/dashboard/deliveries?thread=${thread.id}` }, 'Delivery progress')),
    decision,
    h('h4', {}, 'Participants'),
    participants,
    post);
}

function threadsPage() {
  const firstPage = pagedList($('#threads'), $('#threads-more'), '/threads', (t) => threadCard(t, reload));
  async function reload() {
    const page = await firstPage();
    $('#threads-empty').hidden = page.items.length > 0;
  }
  reload();
}

// --- Deliveries ----------------------------------------------------------------------------

const STEPS = [
  ['accepted', 'Accepted', 'createdAt'],
  ['notified', 'Notified', 'notifiedAt'],
  ['delivered', 'Delivered', 'deliveredAt'],
  ['fetched', 'Fetched', 'fetchedAt'],
];
const stepName = Object.fromEntries(STEPS.map(([key, label]) => [key, label]));

// A step is done when its time is recorded. A failed delivery shows a cross on the step after the
// one it reached; a polling delivery has no doorbell, so Notified and Delivered do not apply to it.
function pipeline(d) {
  const failedAt = d.step === 'failed' ? STEPS.findIndex(([key]) => key === d.failedStep) : -1;
  return h('ol', { class: 'pipeline', 'aria-label': 'Progress' }, STEPS.map(([key, label, at], i) => {
    let state = d[at] ? 'done' : 'todo';
    if (!d.webhook && (key === 'notified' || key === 'delivered')) state = 'skipped';
    if (failedAt >= 0 && i === failedAt + 1) state = 'failed';
    if (d.stalled && key === 'delivered') state = 'stalled';
    const note = { done: '', todo: ' (not yet)', skipped: ' (not applicable: polling)', failed: ' (failed)', stalled: ' (stalled)' }[state];
    return h('li', { class: state, title: d[at] ? time(d[at]) : null }, h('span', { class: 'dot', 'aria-hidden': 'true' }), label, h('span', { class: 'sr' }, note));
  }));
}

// Which run an attempt belongs to: the original publish, a re-publish by the sweep, or a resend.
const attemptRun = (a) => (a.resend > 0 ? `Resend ${a.resend}` : a.publish > 1 ? `Re-publish ${a.publish}` : 'First publish');

function attemptDetail(a) {
  const headers = Object.entries(a.requestHeaders ?? {});
  return h('details', { class: 'attempt-detail' },
    h('summary', {}, 'Request and response'),
    h('dl', {},
      h('dt', {}, 'Headers sent'),
      h('dd', {}, headers.length === 0 ? 'None: nothing was sent.' : h('pre', {}, headers.map(([k, v]) => `${k}: ${v}`).join('\n'))),
      h('dt', {}, 'Response body (first KiB)'),
      h('dd', {}, a.responseBody ? h('pre', {}, a.responseBody) : 'None.')));
}

function attemptLog(d) {
  if (d.attempts.length === 0) return h('p', { class: 'hint' }, d.webhook ? 'No notification attempts yet.' : 'Polling agent: no notifications are sent.');
  const columns = ['Time', 'Run', 'Attempt', 'Status', 'Duration', 'Error', 'Detail'];
  return h('details', { class: 'attempts' },
    h('summary', {}, `Attempt log (${d.attempts.length})`),
    h('table', {},
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, d.attempts.map((a) => h('tr', { class: a.interrupted ? 'interrupted' : null },
        h('td', { dataset: { label: columns[0] } }, timeEl(a.attemptedAt)),
        h('td', { dataset: { label: columns[1] } }, attemptRun(a)),
        h('td', { dataset: { label: columns[2] } }, a.attempt),
        h('td', { dataset: { label: columns[3] } }, a.status ?? '—'),
        h('td', { dataset: { label: columns[4] } }, a.interrupted ? '—' : `${a.durationMs} ms`),
        h('td', { dataset: { label: columns[5] } }, a.error ?? ''),
        h('td', { dataset: { label: columns[6] } }, attemptDetail(a)))))));
}

function deliveryRow(d, onResent) {
  const status = d.step === 'failed'
    ? h('p', { class: 'error' }, `Failed at ${stepName[d.failedStep] ?? d.failedStep}`, d.error ? `: ${d.error}` : '')
    : d.retrying
      ? h('p', { class: 'warn' }, `Retrying: attempt ${d.attempts.at(-1)?.attempt ?? '?'} failed (${d.lastError ?? 'no answer'}); next attempt at `, timeEl(d.nextAttemptAt), '.')
      : d.stalled
        ? h('p', { class: 'warn' }, 'Stalled: notified, but the handler never reported delivered.')
        : null;
  const resend = d.step !== 'failed' ? null : h('button', {
    type: 'button',
    onclick: async (event) => {
      if (await act(event.target, () => api('POST', `/deliveries/${d.id}/resend`), `Resent to ${d.recipient}.`)) onResent();
    },
  }, 'Resend');
  return h('li', { class: `delivery step-${d.step}${d.stalled ? ' stalled' : ''}`, dataset: { delivery: d.id, step: d.step } },
    h('div', { class: 'delivery-head' },
      h('strong', {}, d.recipient),
      h('span', { class: `badge step-${d.step}${d.stalled ? ' stalled' : ''}${d.retrying ? ' retrying' : ''}` },
        d.stalled ? 'Stalled' : d.step === 'failed' ? 'Failed' : d.retrying ? 'Retrying' : stepName[d.step]),
      d.acknowledgedAt ? h('span', { class: 'badge muted' }, 'Acknowledged') : null,
      resend),
    pipeline(d),
    status,
    attemptLog(d));
}

function messageCard(m, onResent) {
  return h('li', { class: 'card message', dataset: { message: m.id } },
    h('div', { class: 'card-head' },
      h('h3', {}, m.summary || '(no summary)'),
      h('span', { class: 'hint' }, timeEl(m.createdAt))),
    h('p', { class: 'hint' }, `${m.sender} in `, h('a', { href: `/dashboard/deliveries?thread=${m.threadId}` }, m.thread)),
    h('ul', { class: 'deliveries' }, m.deliveries.map((d) => deliveryRow(d, onResent))));
}

function deliveriesPage() {
  const form = $('#filters');
  const list = $('#messages');
  const params = new URLSearchParams(location.search);
  form.failed.checked = params.get('failed') === 'true';
  form.retrying.checked = params.get('retrying') === 'true';
  form.stalled.checked = params.get('stalled') === 'true';

  const query = () => {
    const q = new URLSearchParams();
    if (form.failed.checked) q.set('failed', 'true');
    if (form.retrying.checked) q.set('retrying', 'true');
    if (form.stalled.checked) q.set('stalled', 'true');
    if (form.agent.value) q.set('agent', form.agent.value);
    if (form.thread.value) q.set('thread', form.thread.value);
    return q.toString();
  };

  // Only the latest request may draw: an older answer (for the previous filter) arriving late is dropped.
  let latest = 0;
  async function reload() {
    const q = query();
    const mine = ++latest;
    history.replaceState(null, '', q ? `?${q}` : location.pathname);
    const messages = await api('GET', `/deliveries${q ? `?${q}` : ''}`);
    if (mine !== latest) return;
    list.replaceChildren(...messages.map((m) => messageCard(m, reload)));
    $('#messages-empty').hidden = messages.length > 0;
  }

  let pendingReload = null;
  const reloadSoon = () => {
    clearTimeout(pendingReload);
    pendingReload = setTimeout(reload, 300);
  };

  async function fillFilters() {
    // The newest 200 of each to pick from; one named in the address is offered even if older.
    const [agents, threads] = await Promise.all([api('GET', '/agents?limit=200'), api('GET', '/threads?limit=200')]);
    const options = (select, items, chosen) => {
      select.append(...items);
      if (chosen && ![...select.options].some((o) => o.value === chosen)) select.append(h('option', { value: chosen }, chosen));
    };
    options(form.agent, agents.items.map((a) => h('option', { value: a.username }, a.username)), params.get('agent'));
    options(form.thread, threads.items.map((t) => h('option', { value: t.id }, t.title)), params.get('thread'));
    form.agent.value = params.get('agent') ?? '';
    form.thread.value = params.get('thread') ?? '';
  }

  let refresh = null;
  // The session is over: say so and stop, instead of reconnecting and refreshing for ever.
  function sessionEnded(sentence) {
    clearInterval(refresh);
    clearTimeout(pendingReload);
    const status = $('#live');
    status.textContent = 'Signed out';
    status.className = 'live off';
    $('#session-ended-text').textContent = sentence;
    $('#session-ended').hidden = false;
  }

  // A change to a delivery on screen replaces its row in place; anything else may belong to the
  // current filter, so the list is fetched again (once per burst). The server ends the stream
  // with a `session-ended` event when the session ends while it is open.
  function live() {
    const status = $('#live');
    const events = new EventSource(`${API}/deliveries/events`);
    events.addEventListener('session-ended', (event) => {
      events.close();
      sessionEnded(JSON.parse(event.data).error);
    });
    events.addEventListener('ready', () => {
      status.textContent = 'Live';
      status.className = 'live on';
      reloadSoon();
    });
    events.addEventListener('delivery', (event) => {
      const d = JSON.parse(event.data);
      const row = list.querySelector(`[data-delivery="${d.id}"]`);
      if (row) row.replaceWith(deliveryRow(d, reload));
      else reloadSoon();
    });
    events.addEventListener('error', async () => {
      status.textContent = 'Reconnecting…';
      status.className = 'live off';
      // The browser retries a dropped connection by itself, but gives up on a refused one: then a
      // 401 means the session ended while the stream was down; anything else is tried again.
      if (events.readyState !== EventSource.CLOSED) return;
      const res = await fetch(`${API}/me`, { credentials: 'same-origin' }).catch(() => null);
      if (res?.status === 401) sessionEnded('Your session expired; sign in again.');
      else setTimeout(live, 2000);
    });
  }

  form.addEventListener('change', reload);
  fillFilters().then(reload).then(live);
  // Stalling is the passing of time, not a change in the database: look again now and then.
  refresh = setInterval(reload, 60_000);
}

// --- Start ---------------------------------------------------------------------------------

const pages = { 'sign-in': signInPage, agents: agentsPage, threads: threadsPage, deliveries: deliveriesPage };
const page = document.body.dataset.page;
if (page !== 'sign-in') startHeader().catch((error) => toast(error.message, 'error'));
pages[page]?.();
