import { useRef, useState } from 'preact/hooks';
import { api } from '../shared/api.ts';
import { confirmAction } from '../shared/confirm.ts';
import { useAction } from '../shared/hooks.ts';
import { html } from '../shared/html.ts';
import { toast } from '../shared/toast.ts';
import type { Agent, Enabled, EndpointHealth, Paused, Resumed, TestEvent } from '../shared/types.ts';
import { ErrorText, HeaderTable, Time, formatMs, prettyJson, refusedText, shortTime } from '../shared/ui.ts';

// What a person does to an agent's webhook, below its health: send it a test event, pause its
// doorbells by hand and resume them, or switch back on one the service switched off, after a look
// at its last test. Outcomes that arrive later (a test event's answer) come back with the Agents
// list, which is read again on the live stream's `agent` event.

// A button disabled while its request runs loses the focus to the page (the browser's focus fixup),
// as does one the answer takes away: the focus goes to `element` then, unless the person has
// already moved it elsewhere.
export function refocus(element: HTMLElement | null) {
  if (!document.activeElement || document.activeElement === document.body) element?.focus();
}

const path = (agent: Agent, rest: string) => `/agents/${encodeURIComponent(agent.username)}/webhook/${rest}`;

function testOutcome(event: TestEvent) {
  const asked = `${shortTime(event.requestedAt)} by ${event.requestedBy}`;
  if (!event.attemptedAt) return { kind: 'hint', text: `On its way… (sent ${asked})` };
  const took = event.durationMs != null ? ` in ${formatMs(event.durationMs)}` : '';
  if (event.ok) return { kind: 'good', text: `Sent ${asked} — HTTP ${event.status}${took}` };
  return { kind: 'error', text: `Sent ${asked} — ${event.status != null ? `HTTP ${event.status}${took}` : (event.error ?? 'no answer')}` };
}

// The first bytes of the handler's answer, on one line: enough to tell "maintenance" from "not found".
const ANSWER_CHARS = 120;
const answerStart = (body: string | null) => {
  const line = (body ?? '').replace(/\s+/g, ' ').trim();
  return line.length > ANSWER_CHARS ? `${line.slice(0, ANSWER_CHARS)}…` : line;
};

// The newest test event: the request's own answer until the list brings it (or a newer one) back.
function useLatestTest(agent: Agent) {
  const [sent, setSent] = useState<TestEvent | null>(null);
  const latest = agent.lastTestEvent;
  return [sent && (!latest || sent.requestedAt > latest.requestedAt) ? sent : latest, setSent] as const;
}

function TestEventBox({ agent, event, onSent, showAnswer }: {
  agent: Agent;
  event: TestEvent | null;
  onSent: (event: TestEvent) => void;
  // Shows the first bytes of the answer beside the outcome (the switch-on panel's question).
  showAnswer?: boolean;
}) {
  const [action, run] = useAction();
  const button = useRef<HTMLButtonElement>(null);
  const outcome = event ? testOutcome(event) : null;
  const answer = showAnswer && event?.attemptedAt ? answerStart(event.responseBody) : '';
  return html`<div class="test-event">
    <div class="inline-center">
      <button type="button" class="quiet" ref=${button} disabled=${action.busy} onClick=${async () => {
        const queued = await run(() => api<TestEvent>('POST', path(agent, 'test-events')));
        refocus(button.current);
        if (queued) onSent(queued);
      }}>Send test event</button>
      <span class=${`test-outcome ${outcome?.kind ?? 'hint'}`} role="status" data-test-outcome>${outcome?.text ?? 'No test event sent yet.'}${answer
        ? html` <q class="answer-start" data-test-answer>${answer}</q>`
        : null}</span>
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

function ResendChoice({ id, label, checked, onChange }: { id: string; label: string; checked: boolean; onChange: (on: boolean) => void }) {
  return html`<label class="check" for=${id}><input id=${id} type="checkbox" checked=${checked}
    onChange=${(e: Event) => onChange((e.currentTarget as HTMLInputElement).checked)} /> ${label}</label>`;
}

// Switching back on a webhook the service switched off. The last test event since the switch-off
// is shown, with the first bytes of its answer; without one that answered 2xx, the button says so
// and asks before switching on (the domain refuses otherwise: webhook-switch.ts). Resending what
// failed is left unticked: the agent may have read those messages from its inbox meanwhile.
function SwitchOn({ agent, health, onDone }: { agent: Agent; health: EndpointHealth; onDone: () => void }) {
  const [action, run] = useAction();
  const [resend, setResend] = useState(false);
  const [latest, setSent] = useLatestTest(agent);
  const since = latest && health.disabledAt && latest.requestedAt >= health.disabledAt ? latest : null;
  const passing = since?.ok === true;
  async function enable() {
    if (!passing) {
      const confirmed = await confirmAction({
        title: `Switch ${agent.username}'s webhook on without a passing test?`,
        body: [
          since
            ? since.attemptedAt
              ? 'The last test event since it was switched off was not answered with 2xx.'
              : 'The test event sent since it was switched off has not been answered yet.'
            : 'No test event has been sent since it was switched off.',
          'Doorbells go to it again at once. If it still fails, the service switches it off again after its first warning stage, and its messages wait in the inbox meanwhile.',
        ],
        confirm: 'Switch on without a passing test',
      });
      if (!confirmed) return;
    }
    const done = await run(() => api<Enabled>('POST', path(agent, 'enable'), { resendFailed: resend, withoutPassingTest: !passing }));
    if (!done) return;
    toast(`Switched back on${resend ? `; resent ${done.resent}` : ''}.${refusedText(done.refused)}`);
    onDone();
  }
  return html`<div class="switch-on" data-switch-on>
    <h5>Switch back on</h5>
    <p class="hint">${since
      ? passing
        ? 'It answered the last test event since it was switched off:'
        : 'Its last test event since it was switched off did not pass. Send another once the handler is fixed:'
      : 'No test event since it was switched off. Send one to see whether the handler answers now:'}</p>
    <${TestEventBox} agent=${agent} event=${since} onSent=${setSent} showAnswer />
    <div class="inline-center">
      <${ResendChoice} id=${`resend-on-enable-${agent.username}`} checked=${resend} onChange=${setResend}
        label="Also resend what failed while it was failing" />
      <button type="button" class=${passing ? '' : 'quiet danger'} disabled=${action.busy} onClick=${enable}>${passing
        ? 'Switch back on'
        : 'Switch on without a passing test…'}</button>
    </div>
    <${ErrorText} id=${`enable-error-${agent.username}`} error=${action.error?.message} />
  </div>`;
}

function Resume({ agent, onDone }: { agent: Agent; onDone: () => void }) {
  const [action, run] = useAction();
  const [resend, setResend] = useState(false);
  async function resume() {
    const done = await run(() => api<Resumed>('POST', path(agent, 'resume'), { resendFailed: resend }));
    if (!done) return;
    toast(`Resumed${resend ? `; resent ${done.resent}` : ''}.${refusedText(done.refused)}`);
    onDone();
  }
  return html`<div class="inline-center">
      <${ResendChoice} id=${`resend-on-resume-${agent.username}`} checked=${resend} onChange=${setResend}
        label="Also resend what failed before the pause" />
      <button type="button" disabled=${action.busy} onClick=${resume}>Resume doorbells</button>
    </div>
    <${ErrorText} id=${`resume-error-${agent.username}`} error=${action.error?.message} />`;
}

function Pause({ agent, onDone }: { agent: Agent; onDone: () => void }) {
  const [action, run] = useAction();
  const id = `pause-reason-${agent.username}`;
  const errorId = `pause-error-${agent.username}`;
  async function pause(event: SubmitEvent) {
    event.preventDefault();
    const reason = ((event.currentTarget as HTMLFormElement).elements.namedItem('reason') as HTMLInputElement).value;
    const done = await run(() => api<Paused>('POST', path(agent, 'pause'), { reason }));
    if (!done) return;
    toast(`Paused ${agent.username}'s doorbells.`);
    onDone();
  }
  return html`<details class="pause">
    <summary>Pause doorbells…</summary>
    <p class="hint">No doorbells go to the webhook until you resume it; ${agent.username} polls, and what arrives waits in its inbox.
      The URL and signing secret are kept.</p>
    <form class="inline" onSubmit=${pause}>
      <div class="field wide">
        <label for=${id}>Reason <span class="hint">(optional)</span></label>
        <input id=${id} name="reason" maxlength="500" autocomplete="off" placeholder="Deploying the handler"
          aria-describedby=${errorId} aria-invalid=${action.error ? 'true' : null} />
      </div>
      <button type="submit" disabled=${action.busy}>Pause</button>
    </form>
    <${ErrorText} id=${errorId} error=${action.error?.message} />
  </details>`;
}

// The notice of a stopped webhook (switched off by the service, or paused by a person) with the way
// back; nothing for a running one. `onDone`: the state changed, and the control that had the focus
// is gone.
export function StoppedNotice({ agent, health, onDone }: { agent: Agent; health: EndpointHealth; onDone: () => void }) {
  if (health.state === 'disabled') {
    return html`<div class="notice problem" data-webhook-stopped="disabled">
      <p><strong>Switched off</strong>${health.disabledAt ? html` at <${Time} iso=${health.disabledAt} short />` : null}. ${health.disabledReason
        ?? `No doorbells go to this webhook: ${agent.username} polls instead.`}</p>
      <${SwitchOn} agent=${agent} health=${health} onDone=${onDone} />
    </div>`;
  }
  if (health.state === 'paused') {
    return html`<div class="notice webhook-paused" data-webhook-stopped="paused">
      <p><strong>Paused</strong> by ${health.pausedBy}${health.disabledAt ? html` at <${Time} iso=${health.disabledAt} short />` : null}${health.disabledReason
        ? html`: “${health.disabledReason}”`
        : null}. No doorbells go to this webhook: ${agent.username} polls, and what arrives waits in its inbox.</p>
      <${Resume} agent=${agent} onDone=${onDone} />
    </div>`;
  }
  return null;
}

// Below the figures: a test event (a switched-off webhook has its own, in the notice), and the
// pause for a running webhook.
export function WebhookActions({ agent, health, onDone }: { agent: Agent; health: EndpointHealth; onDone: () => void }) {
  const [latest, setSent] = useLatestTest(agent);
  if (health.state === 'disabled') return null;
  return html`<${TestEventBox} agent=${agent} event=${latest} onSent=${setSent} />
    ${health.state === 'paused' ? null : html`<${Pause} agent=${agent} onDone=${onDone} />`}`;
}
