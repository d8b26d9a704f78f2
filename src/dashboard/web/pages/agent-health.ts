import { useRef, useState } from 'preact/hooks';
import { api } from '../shared/api.ts';
import { confirmAction, type ConfirmRequest } from '../shared/confirm.ts';
import { useAction } from '../shared/hooks.ts';
import { html } from '../shared/html.ts';
import { query } from '../shared/query.ts';
import type { Agent, EndpointHealth, Refused, WindowFigures } from '../shared/types.ts';
import { refocus, StoppedNotice, WebhookActions } from './agent-webhook-controls.ts';
import { FailureReason, WarningLine, warningParts } from '../shared/endpoint-trouble.ts';
import { EndpointCharts } from './endpoint-charts.ts';
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

// The state in a word or two, with what made it so: the row's cell and the detail's heading line.
export function HealthBadge({ health }: { health: EndpointHealth }) {
  switch (health.state) {
    case 'healthy':
      return html`<span class="badge good">Healthy</span>`;
    case 'untried':
      return html`<span class="badge muted">Not tried yet</span>`;
    case 'slow':
      return html`<span class="badge retrying">Slow — p95 ${formatMs(health.recent.p95Ms)}</span>`;
    case 'not-reporting':
      return html`<span class="badge stalled">Not reporting — ${plural(health.stalled, 'stalled delivery', 'stalled deliveries')}</span>`;
    case 'disabled':
      // Why, until it is switched back on: a test event answered 2xx since ends the spell, not the reason.
      return html`<span class="badge step-failed">Switched off${health.disabledAt ? ` at ${shortTime(health.disabledAt)}` : ''}</span>${health.lastFailureAt
        ? html` <${HealthReason} health=${health} />`
        : null}`;
    case 'paused':
      return html`<span class="badge muted">Paused${health.pausedBy ? ` by ${health.pausedBy}` : ''}${health.disabledAt ? ` at ${shortTime(health.disabledAt)}` : ''}</span>`;
    case 'failing':
      return html`<span class="badge retrying">Failing${health.failingSince ? ` since ${shortTime(health.failingSince)}` : ''}</span>
        <${HealthReason} health=${health} />`;
  }
}

// Under a failing or switched-off badge: the handler's reason, and the warnings with the switch-off to come.
function HealthReason({ health }: { health: EndpointHealth }) {
  return html`<span class="health-reason">
    <${FailureReason} facts=${failureFacts(health)} />
    ${health.state === 'failing' ? html`<${WarningLine} facts=${health} />` : null}
  </span>`;
}

const capitalized = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

const failureFacts = (health: EndpointHealth) => ({ status: health.lastFailureStatus, error: health.lastFailureError, body: health.lastFailureBody });

// refocus lives with the controls, whose buttons need it most; the other pages take it from here.
export { refocus } from './agent-webhook-controls.ts';

// The last hour's share of attempts answered 2xx, and of how many: the agent's row's one figure.
export function LastHourFigure({ health }: { health: EndpointHealth }) {
  const { attempts, successRate } = health.lastHour;
  if (attempts === 0) return html`<span class="hint">No attempts</span>`;
  return html`${formatPercent(successRate)} of ${attempts}`;
}

// A bucket bound as a person says it: "250 ms", "2.5 s".
const bound = (ms: number) => (ms >= 1000 ? `${ms / 1000} s` : `${ms} ms`);

// The figures, each with what it is: true percentiles over the latest attempts (with how many, and
// since when), then the hour's and day's exact counts, mean and max, and the one figure a
// histogram can give, said as a bound.
function Figures({ health, username }: { health: EndpointHealth; username: string }) {
  const { recent } = health;
  const windows: [string, (w: WindowFigures) => string][] = [
    ['Answered 2xx', (w) => (w.attempts ? `${formatPercent(w.successRate)} (${w.successes} of ${w.attempts})` : '–')],
    ['Mean', (w) => formatMs(w.meanMs)],
    ['Max', (w) => formatMs(w.maxMs)],
    ['95 % took under', (w) => (w.p95UnderMs != null ? bound(w.p95UnderMs) : w.timed ? 'over 1 min' : '–')],
  ];
  return html`<div class="figure-tables">
    <table class="figures" data-figures="recent">
      <caption>
        ${recent.attempts
          ? html`Last ${plural(recent.attempts, 'attempt')}, since <${Time} iso=${recent.since!} short />`
          : 'No attempts yet'}
      </caption>
      <tbody>
        <tr><th scope="row">p50 <span class="hint">(half took at most)</span></th><td data-figure="p50">${formatMs(recent.p50Ms)}</td></tr>
        <tr><th scope="row">p95 <span class="hint">(95 % took at most)</span></th><td data-figure="p95">${formatMs(recent.p95Ms)}</td></tr>
        <tr><th scope="row">Slowest</th><td data-figure="max">${formatMs(recent.maxMs)}</td></tr>
      </tbody>
    </table>
    <table class="figures" data-figures="windows">
      <caption class="sr">Doorbell answers from ${username}'s webhook, last hour and last day</caption>
      <thead><tr><td></td><th scope="col">Last hour</th><th scope="col">Last day</th></tr></thead>
      <tbody>
        ${windows.map(([label, show]) => html`<tr key=${label}><th scope="row">${label}</th><td>${show(health.lastHour)}</td><td>${show(health.lastDay)}</td></tr>`)}
      </tbody>
    </table>
  </div>`;
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

// What is wrong, said first: failing with its reason, the warnings and the switch-off to come;
// slow against its threshold; not reporting with a way to the stalled deliveries.
function StateNotice({ agent, health }: { agent: Agent; health: EndpointHealth }) {
  switch (health.state) {
    case 'failing':
      return html`<div class="notice warn" data-health-notice>
        <p>Failing since <${Time} iso=${health.failingSince!} short /> — <${FailureReason} facts=${failureFacts(health)} chars=${120} />${' '}(${plural(health.consecutiveFailures, 'failure')} in a row, no 2xx between).</p>
        ${warningParts(health).length ? html`<p class="warning-line">${capitalized(warningParts(health).join(' · '))}${health.switchesOffAt ? ' unless it answers 2xx before' : ''}.</p>` : null}
      </div>`;
    case 'slow':
      return html`<div class="notice warn" data-health-notice>
        <p>Slow: 95 % of its last ${plural(health.recent.attempts, 'attempt')} took at most ${formatMs(health.recent.p95Ms)}, above the ${formatMs(health.slowMs)} it should stay under.</p>
      </div>`;
    case 'not-reporting':
      return html`<div class="notice warn" data-health-notice>
        <p>It answers doorbells but does not report: ${plural(health.stalled, 'delivery', 'deliveries')} notified and never reported delivered.
          <a href=${`/dashboard/deliveries${query({ agent: agent.username, state: 'stalled' })}`}>See the stalled deliveries</a></p>
      </div>`;
    default:
      return null;
  }
}

export function WebhookHealth({ agent, health }: { agent: Agent; health: EndpointHealth }) {
  // After switching on, pausing or resuming, the button goes away: focus moves to the section's heading rather than the page's top.
  const heading = useRef<HTMLHeadingElement>(null);
  const focusHeading = () => heading.current?.focus();
  return html`<section class="health" aria-labelledby=${`health-${agent.username}`}>
    <h4 id=${`health-${agent.username}`} tabindex="-1" ref=${heading}>Webhook health<span class="sr"> of ${agent.username}</span></h4>
    <${StoppedNotice} agent=${agent} health=${health} onDone=${focusHeading} />
    <${StateNotice} agent=${agent} health=${health} />
    <div class="health-body">
      <${Figures} health=${health} username=${agent.username} />
      <dl class="facts">
        <dt>Last 2xx</dt>
        <dd>${health.lastSuccessAt ? html`<${Time} iso=${health.lastSuccessAt} short />` : 'Never'}</dd>
        <dt>Last failure</dt>
        <dd>${health.lastFailureAt
          ? html`<${Time} iso=${health.lastFailureAt} short /> — ${failureKind(failureFacts(health))}${health.consecutiveFailures > 1
              ? ` (${health.consecutiveFailures} in a row)`
              : ''}`
          : 'None'}</dd>
        ${health.lastFailureAt
          ? html`<dt>Handler's answer</dt>
              <dd data-failure-body>${health.lastFailureBody?.trim() ? html`<pre class="handler-body">${health.lastFailureBody}</pre>` : html`<span class="hint">None: ${health.lastFailureStatus == null ? 'no answer came' : 'an empty body'}.</span>`}</dd>`
          : null}
      </dl>
    </div>
    <${EndpointCharts} agent=${agent} health=${health} />
    <${WebhookActions} agent=${agent} health=${health} onDone=${focusHeading} />
    <${RecoverSince} agent=${agent} health=${health} />
  </section>`;
}
