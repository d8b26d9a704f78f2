import { useEffect, useRef, useState } from 'preact/hooks';
import { api, apiError } from '../shared/api.ts';
import { confirmAction } from '../shared/confirm.ts';
import { useAction } from '../shared/hooks.ts';
import { html, valueOf } from '../shared/html.ts';
import { toast } from '../shared/toast.ts';
import type { NoticeAttempt, OperatorWebhook, OperatorWebhooks } from '../shared/types.ts';
import { CopyButton, ErrorText, Time, failureKind, plural } from '../shared/ui.ts';

// Operator webhooks (src/domain/people/operator-webhooks.ts): where people are told, besides email,
// that an agent's webhook is failing, switched off or back, that messages wait for approval, or
// that the loop breaker paused a thread. Their health and last attempts are read again every few
// seconds while the page is open: notices are sent by the worker, which tells open pages nothing.
const REFRESH_MS = 3_000;

const FORMATS = [
  { value: 'slack', label: 'Slack', hint: "a Slack incoming webhook's body: text and mrkdwn blocks with a link to the dashboard" },
  { value: 'json', label: 'JSON', hint: 'a typed JSON event, for your own receiver or an incident tool' },
] as const;

const EVENT_NAMES: Record<string, string> = {
  'endpoint.warned': 'Webhook failing',
  'endpoint.switched_off': 'Webhook switched off',
  'endpoint.back': 'Webhook back',
  'holds.waiting': 'Waiting for approval',
  'thread.loop_broken': 'Loop broken',
  test: 'Test notice',
};

function AddForm({ onAdded }: { onAdded: (added: OperatorWebhook & { secret: string }) => void }) {
  const [action, run] = useAction();
  const [format, setFormat] = useState<'slack' | 'json'>('slack');
  const field = action.error?.field ?? null;
  async function submit(event: SubmitEvent) {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const added = await run(() => api<OperatorWebhook & { secret: string }>('POST', '/operator-webhooks', { url: valueOf(form, 'url'), format }));
    if (added) {
      form.reset();
      onAdded(added);
      toast('Webhook added; its signing secret is shown once, below.');
    }
  }
  return html`<form class="stack add-hook" aria-labelledby="add-heading" onSubmit=${submit}>
    <h2 id="add-heading">Add a webhook</h2>
    <div class="field">
      <label for="hook-url">URL</label>
      <input id="hook-url" name="url" type="url" required placeholder="https://hooks.slack.com/services/…" autocomplete="off"
        aria-invalid=${field === 'url' ? 'true' : null} aria-describedby="hook-url-error" />
      <${ErrorText} id="hook-url-error" error=${field === 'url' ? action.error?.message : null} />
    </div>
    <fieldset class="choices">
      <legend>Format</legend>
      ${FORMATS.map((f) => html`<label class="check" key=${f.value}>
        <input type="radio" name="format" value=${f.value} checked=${format === f.value} onChange=${() => setFormat(f.value)} />
        <span>${f.label} <span class="hint">— ${f.hint}</span></span>
      </label>`)}
    </fieldset>
    <button type="submit" disabled=${action.busy}>Add webhook</button>
    ${field !== 'url' ? html`<${ErrorText} id="hook-add-error" error=${action.error?.message} />` : null}
  </form>`;
}

function HealthLine({ hook }: { hook: OperatorWebhook }) {
  const h = hook.health;
  if (h.state === 'failing') {
    return html`<p class="error">Failing since <${Time} iso=${h.failingSince!} short />: ${h.lastFailure}.${h.lastSuccessAt
      ? html` <span class="hint">Last delivered <${Time} iso=${h.lastSuccessAt} short />.</span>`
      : null}</p>`;
  }
  if (h.state === 'healthy') return html`<p>Answering: the last notice was delivered <${Time} iso=${h.lastSuccessAt!} short />.</p>`;
  return html`<p class="hint">No notice sent yet: send a test notice to see it arrive.</p>`;
}

const STATE_BADGE = { healthy: ['good', 'Healthy'], failing: ['step-failed', 'Failing'], untried: ['muted', 'Untried'] } as const;
const OUTCOME = { delivered: 'Delivered', retrying: 'Failed, retried', gave_up: 'Failed, gave up' } as const;

function Attempts({ attempts }: { attempts: NoticeAttempt[] }) {
  if (attempts.length === 0) return null;
  return html`<details class="attempts">
    <summary>Last ${plural(attempts.length, 'attempt')}</summary>
    <table class="notice-attempts">
      <thead><tr><th scope="col">When</th><th scope="col">Notice</th><th scope="col">Answer</th><th scope="col">Outcome</th></tr></thead>
      <tbody>${attempts.map((a) => html`<tr key=${`${a.noticeId}-${a.attempt}`}>
        <td data-label="When"><${Time} iso=${a.attemptedAt} precise /></td>
        <td data-label="Notice">${EVENT_NAMES[a.event] ?? a.event}${a.attempt > 1 ? html` <span class="hint">(attempt ${a.attempt})</span>` : null}</td>
        <td data-label="Answer">${a.status !== null && a.status >= 200 && a.status < 300 ? `HTTP ${a.status}` : failureKind(a)} <span class="hint">in ${a.durationMs} ms</span>
          ${a.responseBody ? html`<code class="answer">${a.responseBody.slice(0, 200)}</code>` : null}</td>
        <td data-label="Outcome">${OUTCOME[a.outcome]}</td>
      </tr>`)}</tbody>
    </table>
  </details>`;
}

function Hook({ hook, onChanged }: { hook: OperatorWebhook; onChanged: () => void }) {
  const [action, run] = useAction();
  const [badge, state] = STATE_BADGE[hook.health.state];
  async function test() {
    if (await run(() => api('POST', `/operator-webhooks/${hook.id}/test`))) {
      toast('Test notice queued; its attempt shows here in a moment.');
      onChanged();
    }
  }
  async function remove() {
    const ok = await confirmAction({
      title: 'Remove this webhook?',
      body: [`No more notices go to ${hook.url}; those still waiting for a retry are dropped.`, 'Adding it again gives it a new signing secret.'],
      confirm: 'Remove webhook',
      danger: true,
    });
    if (!ok) return;
    if (await run(() => api('DELETE', `/operator-webhooks/${hook.id}`))) {
      toast('Webhook removed.');
      onChanged();
    }
  }
  return html`<li class="card operator-webhook" data-hook=${hook.id}>
    <div class="card-head">
      <code class="url">${hook.url}</code>
      <span class="badge">${hook.format === 'slack' ? 'Slack' : 'JSON'}</span>
      <span class=${`badge ${badge}`}>${state}</span>
      <span class="hint">${hook.source === 'environment'
        ? 'Set by OPERATOR_WEBHOOK_URL'
        : html`Added by ${hook.addedBy}, <${Time} iso=${hook.addedAt} short />`}</span>
    </div>
    <${HealthLine} hook=${hook} />
    ${hook.pending > 0 ? html`<p class="warn">${plural(hook.pending, 'notice')} waiting to be sent or retried.</p>` : null}
    <div class="buttons">
      <button type="button" class="quiet" disabled=${action.busy} onClick=${test}>Send a test notice</button>
      ${hook.source === 'dashboard'
        ? html`<button type="button" class="quiet danger" disabled=${action.busy} onClick=${remove}>Remove</button>`
        : html`<span class="hint">Unset the variable and restart to remove it.</span>`}
    </div>
    <${ErrorText} id=${`hook-error-${hook.id}`} error=${action.error?.message} />
    <${Attempts} attempts=${hook.recentAttempts} />
  </li>`;
}

export function NotificationsPage() {
  const [data, setData] = useState<OperatorWebhooks | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [secret, setSecret] = useState<{ url: string; secret: string } | null>(null);
  const secretBox = useRef<HTMLDivElement>(null);
  const load = async () => {
    try {
      setData(await api<OperatorWebhooks>('GET', '/operator-webhooks'));
      setError(null);
    } catch (e) {
      setError(apiError(e).message);
    }
  };
  useEffect(() => {
    void load();
    const timer = setInterval(() => void load(), REFRESH_MS);
    return () => clearInterval(timer);
  }, []);
  useEffect(() => secretBox.current?.focus(), [secret]);
  const hooks = data?.webhooks ?? [];
  return html`
    <h1>Notifications</h1>
    <p class="hint">Besides email, people are told on these webhooks when an agent's webhook is failing, is switched off or answers again,
      when messages wait for approval (at most one notice every 15 minutes), and when the loop breaker pauses a thread. Each notice is signed
      with Standard Webhooks headers and retried when it is not answered with 2xx.</p>
    ${data && !data.dashboardLinks ? html`<p class="notice">Notices carry no link to the dashboard: its address is not known (PUBLIC_URL is not set).</p>` : null}
    ${secret
      ? html`<div class="notice secret" tabindex="-1" ref=${secretBox} role="status">
          <p>Signing secret of <code class="url">${secret.url}</code>, shown only now: <code>${secret.secret}</code> <${CopyButton} text=${() => secret.secret} /></p>
          <p class="hint">A receiver verifies each notice's webhook-signature header with it; Slack ignores it.</p>
          <button type="button" class="quiet" onClick=${() => setSecret(null)}>I have kept it</button>
        </div>`
      : null}
    <section class="card">
      <${AddForm} onAdded=${(added: OperatorWebhook & { secret: string }) => {
        setSecret({ url: added.url, secret: added.secret });
        void load();
      }} />
    </section>
    <h2 class="results">${data ? (hooks.length ? plural(hooks.length, 'webhook') : 'Webhooks') : 'Webhooks'}</h2>
    ${error ? html`<p class="error" role="alert">Could not read the webhooks: ${error}</p>` : null}
    ${!data && !error ? html`<p class="hint" role="status">Loading…</p>` : null}
    ${data && hooks.length === 0 ? html`<p class="placeholder">No operator webhook yet: people are told by email only, where it is set up.</p>` : null}
    <ol class="cards operator-webhooks">${hooks.map((hook) => html`<${Hook} key=${hook.id} hook=${hook} onChanged=${load} />`)}</ol>
  `;
}
