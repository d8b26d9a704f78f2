import { useEffect, useState } from 'preact/hooks';
import { html } from '../shared/html.ts';
import { ListState, MoreButton, usePagedList } from '../shared/lists.ts';
import { query } from '../shared/query.ts';
import type { AuditEntry } from '../shared/types.ts';
import { ErrorText, Time, fromTimeField, toTimeField } from '../shared/ui.ts';

const FILTERS = ['action', 'subject', 'actor', 'since', 'until'] as const;
type Filters = Record<(typeof FILTERS)[number], string>;

// Families of actions a person may pick; any other prefix may be typed.
const FAMILIES: [string, string][] = [
  ['agent.', 'Agents'],
  ['agent.webhook.', 'Webhooks'],
  ['agent.connection.', 'Connected clients'],
  ['thread.', 'Threads'],
  ['message.', 'Messages'],
  ['delivery.', 'Deliveries'],
  ['person.', 'People'],
  ['operator_webhook.', 'Operator webhooks'],
];

function filtersFromAddress(): Filters {
  const params = new URLSearchParams(location.search);
  return Object.fromEntries(FILTERS.map((key) => [key, params.get(key) ?? ''])) as Filters;
}

// Where a subject is seen: an agent in the agents list, a thread on its page, a delivery in the
// deliveries list. A person has no page, nor has a message (a rejected one has no delivery).
function subjectHref(entry: AuditEntry): string | null {
  const q = encodeURIComponent(entry.subject);
  if (entry.subjectType === 'agent') return `/dashboard/agents?q=${q}`;
  if (entry.subjectType === 'thread') return `/dashboard/threads/${q}`;
  if (entry.subjectType === 'delivery') return `/dashboard/deliveries?q=${q}`;
  if (entry.subjectType === 'operator_webhook') return '/dashboard/notifications';
  return null;
}

const shown = (value: unknown): string => {
  if (value === null || value === undefined) return 'none';
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.length ? value.map(shown).join(', ') : 'none';
  return JSON.stringify(value);
};

const fields = (value: unknown): Record<string, unknown> =>
  value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : value == null ? {} : { value };

// Before → after, one line per field that the decision changed or named; a field on one side only
// shows that side.
function Change({ entry }: { entry: AuditEntry }) {
  const before = fields(entry.before);
  const after = fields(entry.after);
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
  if (keys.length === 0) return null;
  return html`<dl class="change">
    ${keys.map((key) => {
      const was = key in before ? shown(before[key]) : null;
      const now = key in after ? shown(after[key]) : null;
      return html`<div key=${key}>
        <dt>${key}</dt>
        <dd>${was !== null && now !== null && was !== now
          ? html`<del>${was}</del> <span aria-hidden="true">→</span><span class="sr">changed to</span> <ins>${now}</ins>`
          : (now ?? was)}</dd>
      </div>`;
    })}
  </dl>`;
}

function Entry({ entry }: { entry: AuditEntry }) {
  const href = subjectHref(entry);
  return html`<li class="card audit-entry" data-audit=${entry.id}>
    <div class="card-head">
      <code class="action">${entry.action}</code>
      <span>${entry.subjectType} ${href ? html`<a href=${href}>${entry.subject}</a>` : html`<b>${entry.subject}</b>`}</span>
      <span class="hint">by <b class="actor">${entry.actor}</b> · <${Time} iso=${entry.at} /></span>
    </div>
    <${Change} entry=${entry} />
    ${entry.reason ? html`<p class="reason">Reason: ${entry.reason}</p>` : null}
  </li>`;
}

export function AuditPage() {
  const [filters, setFilters] = useState<Filters>(filtersFromAddress);
  const [formKey, setFormKey] = useState(0);
  const [timeError, setTimeError] = useState<string | null>(null);
  const list = usePagedList<AuditEntry>('/audit', filters);
  useEffect(() => history.replaceState(null, '', query(filters) || location.pathname), [JSON.stringify(filters)]);

  function apply(event: Event) {
    event.preventDefault?.();
    const data = new FormData(event.currentTarget as HTMLFormElement);
    const text = (key: string) => String(data.get(key) ?? '').trim();
    const since = fromTimeField(text('since'));
    const until = fromTimeField(text('until'));
    if (since === null || until === null) {
      setTimeError(`${since === null ? 'From' : 'To'} must be a time such as ${toTimeField(new Date().toISOString())}, in your local time.`);
      return;
    }
    setTimeError(null);
    setFilters({ action: text('action'), subject: text('subject'), actor: text('actor'), since, until });
  }
  function clear() {
    setFilters({ action: '', subject: '', actor: '', since: '', until: '' });
    setTimeError(null);
    setFormKey((k) => k + 1);
  }
  const filtered = FILTERS.some((key) => filters[key]);
  const { view } = list;

  return html`
    <h1>Audit</h1>
    <p class="hint">Every decision people make, and the CLI's: who, when, what, and what it changed. Newest first.</p>
    <form key=${formKey} class="filters" role="search" aria-label="Filter the audit trail" onSubmit=${apply}>
      <div class="field">
        <label for="audit-action">What</label>
        <input id="audit-action" name="action" list="audit-families" defaultValue=${filters.action} autocomplete="off" placeholder="agent. or agent.archive" />
        <datalist id="audit-families">${FAMILIES.map(([value, label]) => html`<option value=${value}>${label}</option>`)}</datalist>
      </div>
      <div class="field">
        <label for="audit-subject">Subject</label>
        <input id="audit-subject" name="subject" defaultValue=${filters.subject} autocomplete="off" placeholder="username or id" />
      </div>
      <div class="field">
        <label for="audit-actor">Who</label>
        <input id="audit-actor" name="actor" defaultValue=${filters.actor} autocomplete="off" placeholder="username, cli or service" />
      </div>
      <div class="field">
        <label for="audit-since">From</label>
        <input id="audit-since" name="since" defaultValue=${filters.since ? toTimeField(filters.since) : ''} placeholder="YYYY-MM-DD HH:MM" autocomplete="off"
          aria-describedby="audit-time-error" aria-invalid=${timeError?.startsWith('From') ? 'true' : null} />
      </div>
      <div class="field">
        <label for="audit-until">To</label>
        <input id="audit-until" name="until" defaultValue=${filters.until ? toTimeField(filters.until) : ''} placeholder="YYYY-MM-DD HH:MM" autocomplete="off"
          aria-describedby="audit-time-error" aria-invalid=${timeError?.startsWith('To') ? 'true' : null} />
      </div>
      <div class="buttons">
        <button type="submit">Apply</button>
        ${filtered ? html`<button type="button" class="quiet" onClick=${clear}>Clear filters</button>` : null}
      </div>
      <${ErrorText} id="audit-time-error" error=${timeError} />
    </form>
    <h2 class="results">${view.status === 'ready'
      ? `${view.items.length}${view.next ? '+' : ''} ${filtered ? 'matching ' : ''}${view.items.length === 1 ? 'decision' : 'decisions'}, newest first`
      : 'Decisions'}</h2>
    <${ListState} view=${view} noun="decisions" onRetry=${list.reset}
      empty=${filtered ? 'No decisions match.' : 'No decisions yet. Archiving an agent, changing a webhook or deciding a close request is recorded here.'} />
    <ol class="cards audit-list">${view.items.map((entry) => html`<${Entry} key=${entry.id} entry=${entry} />`)}</ol>
    <${MoreButton} list=${list} noun="decisions" />
  `;
}
