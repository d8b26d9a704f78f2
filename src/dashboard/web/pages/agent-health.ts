import { useRef, useState } from 'preact/hooks';
import { api } from '../shared/api.ts';
import { confirmAction, type ConfirmRequest } from '../shared/confirm.ts';
import { useAction } from '../shared/hooks.ts';
import { html } from '../shared/html.ts';
import { query } from '../shared/query.ts';
import { toast } from '../shared/toast.ts';
import type { Agent, Enabled, EndpointHealth, Refused, TestEvent, WindowFigures } from '../shared/types.ts';
import {
  ErrorText,
  failureKind,
  HeaderTable,
  Time,
  formatMs,
  formatPercent,
  fromTimeField,
  plural,
  prettyJson,
  refusedText,
  shortTime,
  toTimeField,
} from '../shared/ui.ts';

// How an agent's webhook has been answering, and what a person can do about it: send a test event
// after fixing the handler, switch a webhook the service switched off back on, and resend what
// failed in a spell. Outcomes that arrive later (a test event's answer, the switch) come back with
// the Agents list, which is read again on the live stream's `agent` event.

export function HealthBadge({ health }: { health: EndpointHealth }) {
  switch (health.state) {
    case 'healthy':
      return html`<span class="badge good">Healthy</span>`;
    case 'untried':
      return html`<span class="badge muted">Not tried yet</span>`;
    case 'disabled':
      // Why, while the spell that switched it off lasts; a test event answered 2xx ends the spell.
      return html`<span class="badge step-failed">Switched off${health.disabledAt ? ` at ${shortTime(health.disabledAt)}` : ''}${health.failingSince
        ? ` — ${lastFailure(health)}`
        : ''}</span>`;
    case 'failing':
      return html`<span class="badge retrying">Failing${health.failingSince ? ` since ${shortTime(health.failingSince)}` : ''} — ${lastFailure(health)}</span>`;
  }
}

// A button disabled while its request runs loses the focus to the page (the browser's focus fixup),
// as does one the answer takes away: the focus goes to `element` then, unless the person has
// already moved it elsewhere.
export function refocus(element: HTMLElement | null) {
  if (!document.activeElement || document.activeElement === document.body) element?.focus();
}

const lastFailure = (health: EndpointHealth) => failureKind({ status: health.lastFailureStatus, error: health.lastFailureError });

// The last hour's share of attempts answered 2xx, and of how many: the agent's row's one figure.
export function LastHourFigure({ health }: { health: EndpointHealth }) {
  const { attempts, successRate } = health.lastHour;
  if (attempts === 0) return html`<span class="hint">No attempts</span>`;
  return html`${formatPercent(successRate)} of ${attempts}`;
}

const FIGURE_ROWS: [string, (w: WindowFigures) => string][] = [
  ['Answered 2xx', (w) => formatPercent(w.successRate)],
  ['p50', (w) => formatMs(w.p50Ms)],
  ['p95', (w) => formatMs(w.p95Ms)],
  ['Attempts', (w) => String(w.attempts)],
];

function Figures({ health, username }: { health: EndpointHealth; username: string }) {
  return html`<table class="figures">
    <caption class="sr">Doorbell answers from ${username}'s webhook</caption>
    <thead><tr><td></td><th scope="col">Last hour</th><th scope="col">Last day</th></tr></thead>
    <tbody>
      ${FIGURE_ROWS.map(([label, show]) => html`<tr key=${label}><th scope="row">${label}</th><td>${show(health.lastHour)}</td><td>${show(health.lastDay)}</td></tr>`)}
    </tbody>
  </table>`;
}

function SwitchOn({ agent, onDone }: { agent: Agent; onDone: () => void }) {
  const [action, run] = useAction();
  const [resend, setResend] = useState(true);
  const id = `resend-on-enable-${agent.username}`;
  async function enable() {
    const done = await run(() => api<Enabled>('POST', `/agents/${encodeURIComponent(agent.username)}/webhook/enable`, { resendFailed: resend }));
    if (!done) return;
    toast(`Switched back on${resend ? `; resent ${done.resent}` : ''}.${refusedText(done.refused)}`);
    onDone();
  }
  return html`<div class="switch-on">
    <label class="check" for=${id}><input id=${id} type="checkbox" checked=${resend} onChange=${(e: Event) => setResend((e.currentTarget as HTMLInputElement).checked)} />
      Resend what failed while it was failing</label>
    <button type="button" disabled=${action.busy} onClick=${enable}>Switch back on</button>
    <${ErrorText} id=${`enable-error-${agent.username}`} error=${action.error?.message} />
  </div>`;
}

function testOutcome(event: TestEvent) {
  const asked = `${shortTime(event.requestedAt)} by ${event.requestedBy}`;
  if (!event.attemptedAt) return { kind: 'hint', text: `On its way… (sent ${asked})` };
  const took = event.durationMs != null ? ` in ${formatMs(event.durationMs)}` : '';
  if (event.ok) return { kind: 'good', text: `Sent ${asked} — HTTP ${event.status}${took}` };
  return { kind: 'error', text: `Sent ${asked} — ${event.status != null ? `HTTP ${event.status}${took}` : (event.error ?? 'no answer')}` };
}

function TestEventBox({ agent }: { agent: Agent }) {
  const [action, run] = useAction();
  const button = useRef<HTMLButtonElement>(null);
  // The answer of the request, until the list brings this event (or a newer one) back.
  const [sent, setSent] = useState<TestEvent | null>(null);
  const latest = agent.lastTestEvent;
  const event = sent && (!latest || sent.requestedAt > latest.requestedAt) ? sent : latest;
  const outcome = event ? testOutcome(event) : null;
  return html`<div class="test-event">
    <div class="inline-center">
      <button type="button" class="quiet" ref=${button} disabled=${action.busy} onClick=${async () => {
        const queued = await run(() => api<TestEvent>('POST', `/agents/${encodeURIComponent(agent.username)}/webhook/test-events`));
        refocus(button.current);
        if (queued) setSent(queued);
      }}>Send test event</button>
      <span class=${`test-outcome ${outcome?.kind ?? 'hint'}`} role="status" data-test-outcome>${outcome?.text ?? 'No test event sent yet.'}</span>
    </div>
    <${ErrorText} id=${`test-error-${agent.username}`} error=${action.error?.message} />
    ${event?.attemptedAt
      ? html`<details class="attempt-detail">
          <summary>Test event's request and response</summary>
          <dl>
            <dt>Sent to</dt><dd><code>${event.url}</code></dd>
            ${event.error ? html`<dt>Error</dt><dd>${event.error}</dd>` : null}
            <dt>Headers sent</dt><dd><${HeaderTable} headers=${event.requestHeaders} caption="Headers sent" none="None: nothing was sent." /></dd>
            <dt>Response headers</dt><dd><${HeaderTable} headers=${event.responseHeaders} caption="Response headers" none="None: no answer came." /></dd>
            <dt>Response body (first KiB)</dt><dd>${event.responseBody ? html`<pre>${prettyJson(event.responseBody)}</pre>` : 'None.'}</dd>
          </dl>
        </details>`
      : null}
  </div>`;
}

type Counted = { failed: number; upTo: string | null; from: string };

// A switched-off webhook owes no doorbell: what is resent then goes to the inbox alone
// (delivery-steps.ts resendWhere).
const resendRequest = (agent: Agent, health: EndpointHealth, failed: number): ConfirmRequest => ({
  title: `Resend ${plural(failed, 'Failed delivery', 'Failed deliveries')} to ${agent.username}?`,
  body: [
    health.state === 'disabled'
      ? `Each goes back to Accepted without a doorbell, as the webhook is switched off: ${agent.username} finds them in its inbox. To have them rung, switch the webhook back on first.`
      : 'Each goes back to Accepted and its doorbell is rung again.',
  ],
  confirm: `Resend ${failed}`,
});

// Resends, after a look at how many, the agent's Failed deliveries accepted since a moment the
// person picks (by default the start of the failing spell): the bulk resend of the Deliveries
// page, narrowed to this agent.
function RecoverSince({ agent, health }: { agent: Agent; health: EndpointHealth }) {
  const [action, run] = useAction();
  const [counted, setCounted] = useState<Counted | null>(null);
  const [resent, setResent] = useState<{ text: string; from: string } | null>(null);
  const [unreadable, setUnreadable] = useState<string | null>(null);
  const countButton = useRef<HTMLButtonElement>(null);
  const summary = useRef<HTMLElement>(null);
  const id = `recover-from-${agent.username}`;
  const errorId = `recover-error-${agent.username}`;
  const start = health.failingSince ?? health.lastFailureAt ?? new Date(Date.now() - 3_600_000).toISOString();
  async function count(event: SubmitEvent) {
    event.preventDefault();
    const value = (event.currentTarget as HTMLFormElement).elements.namedItem('from') as HTMLInputElement;
    const from = fromTimeField(value.value);
    setResent(null);
    setCounted(null);
    setUnreadable(from ? null : `Give a time such as ${toTimeField(new Date().toISOString())}, in your local time.`);
    if (!from) return value.focus();
    const found = await run(() => api<{ failed: number; upTo: string | null }>('GET', `/deliveries/failed-in-view${query({ agent: agent.username, from })}`));
    refocus(countButton.current);
    if (found) setCounted({ ...found, from });
  }
  async function resend() {
    if (!counted) return;
    if (!(await confirmAction(resendRequest(agent, health, counted.failed)))) return;
    const done = await run(() =>
      api<{ resent: number; refused: Refused }>('POST', '/deliveries/resend-failed', { agent: agent.username, from: counted.from, upTo: counted.upTo }),
    );
    if (!done) return;
    setResent({ text: `Resent ${done.resent}.${refusedText(done.refused)}`, from: counted.from });
    setCounted(null);
    refocus(summary.current);
  }
  return html`<details class="recover">
    <summary ref=${summary}>Resend failed since…</summary>
    <form class="inline" onSubmit=${count}>
      <div class="field">
        <label for=${id}>Failed deliveries accepted since</label>
        <input id=${id} name="from" required defaultValue=${toTimeField(start)} placeholder="YYYY-MM-DD HH:MM" autocomplete="off"
          aria-describedby=${errorId} aria-invalid=${unreadable ? 'true' : null} />
      </div>
      <button type="submit" class="quiet" ref=${countButton} disabled=${action.busy}>Count</button>
    </form>
    <div role="status">
      ${counted
        ? html`<div class="inline-center">
            <p>${plural(counted.failed, 'failed delivery', 'failed deliveries')} since <${Time} iso=${counted.from} short />.</p>
            ${counted.failed > 0 ? html`<button type="button" disabled=${action.busy} onClick=${resend}>Resend ${counted.failed}</button>` : null}
          </div>`
        : null}
      ${resent
        ? html`<p>${resent.text} <a href=${`/dashboard/deliveries${query({ agent: agent.username, from: resent.from })}`}>Watch them on Deliveries</a></p>`
        : null}
    </div>
    <${ErrorText} id=${errorId} error=${unreadable ?? action.error?.message} />
  </details>`;
}

export function WebhookHealth({ agent, health }: { agent: Agent; health: EndpointHealth }) {
  // After switching on, the button goes away: focus moves to the section's heading rather than the page's top.
  const heading = useRef<HTMLHeadingElement>(null);
  return html`<section class="health" aria-labelledby=${`health-${agent.username}`}>
    <h4 id=${`health-${agent.username}`} tabindex="-1" ref=${heading}>Webhook health<span class="sr"> of ${agent.username}</span></h4>
    ${health.state === 'disabled'
      ? html`<div class="notice problem">
          <p>${health.disabledReason ?? `No doorbells go to this webhook: ${agent.username} polls instead.`}</p>
          <${SwitchOn} agent=${agent} onDone=${() => heading.current?.focus()} />
        </div>`
      : null}
    <div class="health-body">
      <${Figures} health=${health} username=${agent.username} />
      <dl class="facts">
        <dt>Last 2xx</dt>
        <dd>${health.lastSuccessAt ? html`<${Time} iso=${health.lastSuccessAt} short />` : 'Never'}</dd>
        <dt>Last failure</dt>
        <dd>${health.lastFailureAt
          ? html`<${Time} iso=${health.lastFailureAt} short /> — ${health.lastFailureStatus != null ? `HTTP ${health.lastFailureStatus}` : (health.lastFailureError ?? 'no answer')}${health.consecutiveFailures > 1
              ? ` (${health.consecutiveFailures} in a row)`
              : ''}`
          : 'None'}</dd>
      </dl>
    </div>
    <${TestEventBox} agent=${agent} />
    <${RecoverSince} agent=${agent} health=${health} />
  </section>`;
}
