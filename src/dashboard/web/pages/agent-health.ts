import { useRef, useState } from 'preact/hooks';
import { api } from '../shared/api.ts';
import { confirmAction, type ConfirmRequest } from '../shared/confirm.ts';
import { useAction } from '../shared/hooks.ts';
import { html } from '../shared/html.ts';
import { query } from '../shared/query.ts';
import type { Agent, EndpointHealth, Refused, WindowFigures } from '../shared/types.ts';
import { refocus, StoppedNotice, WebhookActions } from './agent-webhook-controls.ts';
import {
  ErrorText,
  failureKind,
  Time,
  formatMs,
  formatPercent,
  fromTimeField,
  plural,
  refusedText,
  shortTime,
  toTimeField,
} from '../shared/ui.ts';

// How an agent's webhook has been answering, and what a person can do about it: the controls of
// agent-webhook-controls.ts (test event, pause and resume, switching back on), and resending what
// failed in a spell. Outcomes that arrive later (a test event's answer, the switch) come back with
// the Agents list, which is read again on the live stream's `agent` event.

export function HealthBadge({ health }: { health: EndpointHealth }) {
  switch (health.state) {
    case 'healthy':
      return html`<span class="badge good">Healthy</span>`;
    case 'untried':
      return html`<span class="badge muted">Not tried yet</span>`;
    case 'disabled':
      // Why, until it is switched back on: a test event answered 2xx since ends the spell, not the reason.
      return html`<span class="badge step-failed">Switched off${health.disabledAt ? ` at ${shortTime(health.disabledAt)}` : ''}${health.lastFailureAt
        ? ` — ${lastFailure(health)}`
        : ''}</span>`;
    case 'paused':
      return html`<span class="badge muted">Paused${health.pausedBy ? ` by ${health.pausedBy}` : ''}${health.disabledAt ? ` at ${shortTime(health.disabledAt)}` : ''}</span>`;
    case 'failing':
      return html`<span class="badge retrying">Failing${health.failingSince ? ` since ${shortTime(health.failingSince)}` : ''} — ${lastFailure(health)}</span>`;
  }
}

// refocus lives with the controls, whose buttons need it most; the other pages take it from here.
export { refocus } from './agent-webhook-controls.ts';

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

type Counted = { failed: number; upTo: string | null; from: string };

// A switched-off or paused webhook owes no doorbell: what is resent then goes to the inbox alone
// (delivery-steps.ts resendWhere).
const resendRequest = (agent: Agent, health: EndpointHealth, failed: number): ConfirmRequest => ({
  title: `Resend ${plural(failed, 'Failed delivery', 'Failed deliveries')} to ${agent.username}?`,
  body: [
    health.state === 'disabled'
      ? `Each goes back to Accepted without a doorbell, as the webhook is switched off: ${agent.username} finds them in its inbox. To have them rung, switch the webhook back on first.`
      : health.state === 'paused'
        ? `Each goes back to Accepted without a doorbell, as the webhook is paused: ${agent.username} finds them in its inbox. To have them rung, resume the webhook first.`
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
  // After switching on, pausing or resuming, the button goes away: focus moves to the section's heading rather than the page's top.
  const heading = useRef<HTMLHeadingElement>(null);
  const focusHeading = () => heading.current?.focus();
  return html`<section class="health" aria-labelledby=${`health-${agent.username}`}>
    <h4 id=${`health-${agent.username}`} tabindex="-1" ref=${heading}>Webhook health<span class="sr"> of ${agent.username}</span></h4>
    <${StoppedNotice} agent=${agent} health=${health} onDone=${focusHeading} />
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
    <${WebhookActions} agent=${agent} health=${health} onDone=${focusHeading} />
    <${RecoverSince} agent=${agent} health=${health} />
  </section>`;
}
