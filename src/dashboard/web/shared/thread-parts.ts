import { useState } from 'preact/hooks';
import { LIMITS } from '../../../domain/shared/limits.ts';
import type { ThreadState } from '../../../domain/shared/state-names.ts';
import { api } from './api.ts';
import { confirmAction } from './confirm.ts';
import { useAction } from './hooks.ts';
import { html, valueOf } from './html.ts';
import { toast } from './toast.ts';
import type { Thread } from './types.ts';
import { ErrorText, Time } from './ui.ts';

// A thread as the Threads page shows it in its list and the thread's own page shows it whole.

export const THREAD_STATE_LABELS: Record<ThreadState, string> = { open: 'Open', 'close-pending': 'Close requested', closed: 'Closed' };

export function PostForm({ thread }: { thread: Thread }) {
  const [action, run] = useAction();
  const [posted, setPosted] = useState<string | null>(null);
  const error = action.error?.message ?? null;
  const field = action.error?.field === 'content' || action.error?.field === 'summary' ? action.error.field : null;
  const contentId = `post-${thread.id}`;
  const summaryId = `summary-${thread.id}`;
  const errorId = `post-error-${thread.id}`;
  async function submit(event: SubmitEvent) {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const body: { content: string; summary?: string } = { content: valueOf(form, 'content') };
    if (valueOf(form, 'summary').trim()) body.summary = valueOf(form, 'summary');
    setPosted(null);
    const done = await run(() => api<{ recipients: number }>('POST', `/threads/${thread.id}/messages`, body));
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
    ${field === 'content' ? html`<${ErrorText} id=${errorId} error=${error} />` : null}
    <label for=${summaryId}>Summary <span class="hint">(required above ${LIMITS.summaryRequiredAbove} characters)</span></label>
    <input id=${summaryId} name="summary" aria-invalid=${field === 'summary' ? 'true' : null} aria-describedby=${field === 'summary' ? errorId : null} />
    ${field === 'summary' ? html`<${ErrorText} id=${errorId} error=${error} />` : null}
    <div class="inline">
      <button type="submit" disabled=${action.busy}>Post</button>
      <span class="hint" role="status">${posted ?? ''}</span>
    </div>
    ${field === null ? html`<${ErrorText} id=${errorId} error=${error} />` : null}
  </form>`;
}

function Participants({ thread }: { thread: Thread }) {
  const [action, run] = useAction();
  return html`<div class="participants-box">
    <ul class="participants" aria-label=${`Participants of ${thread.title}`}>
      ${thread.participants.map((p) => html`<li key=${p.username}>
        <span>${p.username}</span>
        ${thread.state === 'closed'
          ? null
          : html`<button type="button" class="quiet danger" disabled=${action.busy} aria-label=${`Remove ${p.username} from ${thread.title}`}
              onClick=${async () => {
                const confirmed = await confirmAction({
                  title: `Remove ${p.username} from ${thread.title}?`,
                  body: [
                    `${p.username} loses the thread at once: the thread and its messages answer it 404 from now on, and it can no longer post here.`,
                    `Messages from this thread still waiting in its inbox drop out of it, and no doorbell is rung for them from now on. What it already posted stays in the thread.`,
                    `The dashboard cannot add it back: only an agent still in the thread can (add_participant), and ${p.username} then sees the whole history again.`,
                  ],
                  confirm: 'Remove',
                  danger: true,
                });
                if (!confirmed) return;
                if (await run(() => api('DELETE', `/threads/${thread.id}/participants/${encodeURIComponent(p.username)}`))) toast(`${p.username} removed.`);
              }}>Remove</button>`}
      </li>`)}
    </ul>
    <${ErrorText} id=${`participants-error-${thread.id}`} error=${action.error?.message} />
  </div>`;
}

function Decision({ thread }: { thread: Thread }) {
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
    <${ErrorText} id=${`decision-error-${thread.id}`} error=${action.error?.message} />
  </div>`;
}

// On the Threads page a thread is a card under the list's heading; on its own page, the page,
// whose post form follows the messages (`post` false).
export function ThreadBody({ thread, level, post = true }: { thread: Thread; level: number; post?: boolean }) {
  const Heading = `h${level}`;
  return html`
    ${thread.goal ? html`<p class="goal">${thread.goal}</p>` : null}
    <p class="hint">Opened by ${thread.openedBy} · <${Time} iso=${thread.createdAt} /> · <a href=${`/dashboard/deliveries?thread=${thread.id}`}>Delivery progress</a></p>
    <${Decision} thread=${thread} />
    <${Heading}>Participants<//>
    <${Participants} thread=${thread} />
    ${post && thread.state === 'open' ? html`<${PostForm} thread=${thread} />` : null}
  `;
}
