import { useEffect, useState } from 'preact/hooks';
import { api, apiError } from '../shared/api.ts';
import { useAction } from '../shared/hooks.ts';
import { html } from '../shared/html.ts';
import { toast } from '../shared/toast.ts';
import type { Decided, Overview, Page, WaitingMessage } from '../shared/types.ts';
import { ErrorText, Time, ago, fullTime, plural } from '../shared/ui.ts';

// The top of the Overview whenever something waits for a person: threads the loop breaker paused,
// then every held message with what a person needs to decide on it (who to whom, why it waits, how
// long it has and may still, what it says and what came before it) and the decision's buttons.

const PAGE_SIZE = 20;

const WHY: Record<WaitingMessage['reason'], { badge: string; text: string }> = {
  agent: { badge: 'Agent held', text: "A person marked its sender: this agent's messages wait for approval." },
  thread: { badge: 'Thread held', text: 'A person marked its thread: every message in it waits for approval.' },
  loop: { badge: 'Loop breaker', text: "The loop breaker paused its thread: its agents exchanged too many messages with no person's among them." },
};

const threadLink = (id: string) => `/dashboard/threads/${id}`;

function PausedCard({ thread }: { thread: Overview['holds']['paused'][number] }) {
  return html`<div class="paused-card" role="alert" data-paused=${thread.threadId}>
    <strong>Paused by the loop breaker:</strong> <a href=${threadLink(thread.threadId)}>${thread.title}</a>
    <span class="hint"> since <${Time} iso=${thread.pausedAt} short /></span>
    <p>Its agents exchanged too many messages with no person's message among them. Their further messages wait for approval, listed here, until a
      person resumes the thread <a href=${threadLink(thread.threadId)}>on its page</a>.</p>
  </div>`;
}

function HeldCard({ m, onDecided }: { m: WaitingMessage; onDecided: (d: Decided) => void }) {
  const [action, run] = useAction();
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState('');
  const decide = async (path: string, body: unknown, said: (d: Decided) => string) => {
    const decided = await run(() => api<Decided>('POST', path, body));
    if (!decided) return;
    toast(said(decided));
    onDecided(decided);
  };
  const approved = (d: Decided) =>
    d.rejected.length > 0 ? `${plural(d.approved.length, 'message')} sent; ${d.rejected.length} could not be: ${d.rejected[0]!.reason}` : `${plural(d.approved.length, 'message')} approved and sent.`;
  const why = WHY[m.reason];
  const errorId = `held-error-${m.id}`;
  return html`<li class=${`card held why-${m.reason}`} id=${`hold-${m.id}`} tabindex="-1" data-held=${m.id} aria-labelledby=${`held-${m.id}`}>
    <div class="card-head">
      <h3 id=${`held-${m.id}`}><span class="who">${m.sender}</span> <span aria-label="to">→</span> ${m.recipients.length > 0 ? m.recipients.join(', ') : html`<em>nobody else</em>`}</h3>
      <span class=${`badge why ${m.reason}`} title=${why.text}>${why.badge}</span>
    </div>
    <p class="hint held-meta">
      In <a href=${threadLink(m.threadId)}>${m.threadTitle}</a>${' · '}held <time datetime=${m.createdAt} title=${fullTime(m.createdAt)}>${ago(m.createdAt)}</time>${' · '}<span class="expires">expires <time datetime=${m.expiresAt} title=${fullTime(m.expiresAt)}>${ago(m.expiresAt)}</time> unless decided</span>
    </p>
    <p class="why-text">${why.text}</p>
    <p class="held-summary">${m.summary ?? m.content.split('\n').find((l) => l.trim()) ?? ''}</p>
    <details class="held-content">
      <summary>Full message</summary>
      <pre>${m.content}</pre>
    </details>
    ${m.context.length > 0
      ? html`<div class="held-context">
          <p class="hint">Before it in the thread:</p>
          <ol>${m.context.map((c) => html`<li><b>${c.sender}</b>: ${c.line} <span class="hint">· <${Time} iso=${c.createdAt} short /></span></li>`)}</ol>
        </div>`
      : html`<p class="hint">It would be the first message of the thread.</p>`}
    ${rejecting
      ? html`<form class="reject-form" onSubmit=${(event: Event) => {
          event.preventDefault();
          decide('/holds/reject', { messageIds: [m.id], reason }, () => `Rejected; ${m.sender} is told why.`);
        }}>
          <label for=${`reason-${m.id}`}>Why is it rejected? ${m.sender} is told.</label>
          <textarea id=${`reason-${m.id}`} rows="2" maxlength="500" required value=${reason}
            aria-describedby=${errorId} onInput=${(e: Event) => setReason((e.target as HTMLTextAreaElement).value)}></textarea>
          <div class="buttons">
            <button type="submit" class="danger" disabled=${action.busy}>Reject</button>
            <button type="button" class="quiet" disabled=${action.busy} onClick=${() => setRejecting(false)}>Cancel</button>
          </div>
        </form>`
      : html`<div class="buttons">
          <button type="button" disabled=${action.busy} onClick=${() => decide('/holds/approve', { messageIds: [m.id] }, approved)}>Approve</button>
          <button type="button" class="quiet danger" disabled=${action.busy} onClick=${() => setRejecting(true)}>Reject…</button>
          <button type="button" class="quiet" disabled=${action.busy} onClick=${() => decide('/holds/approve-all', { sender: m.sender }, approved)}>Approve all from ${m.sender}</button>
        </div>`}
    <${ErrorText} id=${errorId} error=${action.error?.message} />
  </li>`;
}

// `version` changes whenever the Overview reads its figures again (a live change, a decision), and
// the list is read again with it: the first pages, as many as were shown.
export function WaitingForYou({ holds, version, onDecided }: { holds: Overview['holds']; version: number; onDecided: () => void }) {
  const [items, setItems] = useState<WaitingMessage[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [shown, setShown] = useState(PAGE_SIZE);
  const [error, setError] = useState<string | null>(null);
  const load = async (limit: number) => {
    try {
      const page = await api<Page<WaitingMessage>>('GET', `/holds?limit=${limit}`);
      setItems(page.items);
      setNext(page.next);
      setError(null);
    } catch (e) {
      setError(apiError(e).message);
    }
  };
  useEffect(() => {
    if (holds.waiting > 0) load(shown);
    else setItems([]);
  }, [version, shown, holds.waiting]);
  // Opened from an email's link to one message (/dashboard/overview#hold-…): shown once it is listed.
  const [linked, setLinked] = useState(location.hash.startsWith('#hold-') ? location.hash.slice(1) : null);
  useEffect(() => {
    const card = linked ? document.getElementById(linked) : null;
    if (!card) return;
    card.scrollIntoView({ block: 'center' });
    card.focus();
    setLinked(null);
  }, [items, linked]);
  if (holds.waiting === 0 && holds.paused.length === 0) return null;
  return html`<section class="card holds-waiting" id="waiting" aria-labelledby="waiting-heading">
    <h2 id="waiting-heading">Waiting for you ${holds.waiting > 0 ? html`<span class="badge step-failed" data-waiting-total>${holds.waiting}</span>` : null}</h2>
    ${holds.paused.map((t) => html`<${PausedCard} key=${t.threadId} thread=${t} />`)}
    ${holds.waiting > 0
      ? html`<p class="hint">No recipient sees these messages until a person approves them; the sender is told of each decision. One left undecided is rejected when it expires.</p>`
      : null}
    ${error ? html`<p class="notice problem" role="alert">Could not load the waiting messages: ${error}</p>` : null}
    <ul class="cards held-list">
      ${items.map((m) => html`<${HeldCard} key=${m.id} m=${m} onDecided=${onDecided} />`)}
    </ul>
    ${next ? html`<button type="button" class="quiet" onClick=${() => setShown(shown + PAGE_SIZE)}>Show more</button>` : null}
  </section>`;
}

// Where an email's one-time link lands once spent, or when its message no longer waits.
export function SpentLinkNotice() {
  if (new URLSearchParams(location.search).get('link') !== 'spent') return null;
  return html`<p class="notice" role="status" data-link-spent>
    That link was used before, or its message was decided or expired meanwhile: each email link works once. What still waits is below.
  </p>`;
}
