import { useState } from 'preact/hooks';
import { api } from '../shared/api.ts';
import { useAction } from '../shared/hooks.ts';
import { html } from '../shared/html.ts';
import { toast } from '../shared/toast.ts';
import type { PeoplesThread, ThreadHolds } from '../shared/types.ts';
import { ErrorText, fullTime } from '../shared/ui.ts';

// What people decide about one thread (src/domain/threads/thread-holds.ts): whether every agent's
// message in it waits for a person, and resuming it once the loop breaker paused it.

type OnChanged = (changed: ThreadHolds) => void;

export function ThreadHoldSwitch({ thread, onChanged }: { thread: PeoplesThread; onChanged: OnChanged }) {
  const [action, run] = useAction();
  const id = `thread-holds-${thread.id}`;
  // Shows the person's choice while it is saved; a refused one goes back to what is stored.
  const [asked, setAsked] = useState<boolean | null>(null);
  async function change(event: Event) {
    const holds = (event.currentTarget as HTMLInputElement).checked;
    setAsked(holds);
    const saved = await run(() => api<ThreadHolds>('PUT', `/threads/${thread.id}/holds`, { holds }));
    setAsked(null);
    if (saved) {
      onChanged(saved);
      toast(holds ? 'Messages in this thread now wait for approval.' : 'Messages in this thread no longer wait for approval.');
    }
  }
  return html`<div class="switch-row">
    <label class="check" for=${id}>
      <input id=${id} type="checkbox" role="switch" checked=${asked ?? thread.holdsMessages} disabled=${action.busy} onChange=${change}
        aria-describedby=${`${id}-hint`} />
      Messages here wait for approval
    </label>
    <small id=${`${id}-hint`}>${thread.holdsMessages
      ? "Every agent's message in this thread is held until a person approves it; people's messages are never held."
      : "Off: agents' messages here go straight to the participants."}</small>
    <${ErrorText} id=${`thread-holds-error-${thread.id}`} error=${action.error?.message} />
  </div>`;
}

export function PausedBanner({ thread, onChanged }: { thread: PeoplesThread; onChanged: OnChanged }) {
  const [action, run] = useAction();
  if (!thread.pausedAt) return null;
  const { messages, windowMinutes } = thread.loopBreaker;
  async function resume() {
    const resumed = await run(() => api<ThreadHolds>('POST', `/threads/${thread.id}/resume`));
    if (resumed) {
      onChanged(resumed);
      toast('Resumed: the loop breaker counts again from now. Messages held while it was paused still wait for a decision.');
    }
  }
  return html`<div class="paused" data-paused=${thread.pausedAt}>
    <p><strong>Paused by the loop breaker at <time datetime=${thread.pausedAt}>${fullTime(thread.pausedAt)}</time>:</strong>${' '}its agents exchanged more than ${messages} messages in ${windowMinutes} minute${windowMinutes === 1 ? '' : 's'} with no person's message.</p>
    <p>What its agents post now waits for a person. Resuming lets them post again; the messages held meanwhile still wait for a decision.</p>
    <button type="button" disabled=${action.busy} onClick=${resume}>Resume</button>
    <${ErrorText} id=${`resume-error-${thread.id}`} error=${action.error?.message} />
  </div>`;
}

// What its agents sent that no participant sees yet: decided where every waiting message is.
export function WaitingHere({ thread }: { thread: PeoplesThread }) {
  if (thread.waiting === 0) return null;
  const messages = thread.waiting === 1 ? '1 message from its agents waits' : `${thread.waiting} messages from its agents wait`;
  return html`<p class="notice waiting-here" role="status">
    ${messages} for a person's approval; no participant sees ${thread.waiting === 1 ? 'it' : 'them'} until then.
    ${' '}<a href="/dashboard/overview">Decide on the Overview</a>
  </p>`;
}
