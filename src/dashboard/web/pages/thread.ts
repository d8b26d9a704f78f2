import { useEffect, useState } from 'preact/hooks';
import { api, apiError } from '../shared/api.ts';
import { stateClass, stateOf } from '../shared/delivery-state.ts';
import { useThrottled } from '../shared/hooks.ts';
import { html } from '../shared/html.ts';
import { ListState, MoreButton, usePagedList } from '../shared/lists.ts';
import { useLive } from '../shared/live.ts';
import { PostForm, THREAD_STATE_LABELS, ThreadBody } from '../shared/thread-parts.ts';
import type { MessageFile, PeoplesThread, ThreadHolds, ThreadMessage } from '../shared/types.ts';
import { Time } from '../shared/ui.ts';
import { WebhookBanners, useWebhookTrouble } from '../shared/webhook-trouble.ts';
import { PausedBanner, ThreadHoldSwitch, WaitingHere } from './thread-holds.ts';

function RecipientBadges({ message }: { message: ThreadMessage }) {
  return html`<ul class="recipients" aria-label="Deliveries">
    ${message.deliveries.map((d) => html`<li key=${d.deliveryId}>
      <a href=${`/dashboard/deliveries?q=${d.deliveryId}`}>${d.recipient}</a>
      ${' '}<span class=${stateClass(d)}>${stateOf(d)}</span>
    </li>`)}
  </ul>`;
}

// Images a browser shows without running anything; any other type (SVG among them) is a link only.
const PREVIEWED = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

const sizeOf = (bytes: number) =>
  bytes < 1024 ? `${bytes} B` : bytes < 1024 * 1024 ? `${(bytes / 1024).toFixed(1)} KiB` : `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

// A message's files: each a download with its size and type, images previewed. Both come from the
// dashboard API's download route, which serves every file as an attachment in a sandbox of its
// own (web/file-response.ts), so a file never runs in the dashboard's origin.
function Attachments({ files }: { files: MessageFile[] }) {
  if (files.length === 0) return null;
  return html`<ul class="attachments" aria-label="Files">
    ${files.map((f) => {
      const href = `/dashboard/api/files/${f.id}/content`;
      return html`<li key=${f.id}>
        ${PREVIEWED.has(f.contentType) ? html`<a href=${href} download=${f.name}><img src=${href} alt=${f.name} loading="lazy" /></a>` : null}
        <a href=${href} download=${f.name}>${f.name}</a>${' '}<span class="hint">${sizeOf(f.size)} · ${f.contentType}</span>
      </li>`;
    })}
  </ul>`;
}

type ThreadView = { status: 'loading' | 'ready' | 'error'; record: PeoplesThread | null; error: string | null };

// One thread: its card, with everything the Threads page offers, and its messages, each with how
// far it got to each recipient. The messages read as a conversation, top to bottom: the list is
// read newest first (a page at a time, from the newest) and shown oldest first, with the button for
// earlier ones above it and new ones arriving at the bottom, where the reply is written.
export function ThreadPage() {
  const threadId = decodeURIComponent(location.pathname.split('/').pop()!);
  const [thread, setThread] = useState<ThreadView>({ status: 'loading', record: null, error: null });
  const messages = usePagedList<ThreadMessage>(`/threads/${threadId}/messages`, {});
  const loadThread = async () => {
    try {
      const record = await api<PeoplesThread>('GET', `/threads/${threadId}`);
      setThread({ status: 'ready', record, error: null });
      document.title = `${record.title} · Agent Messaging Service`;
    } catch (error) {
      const message = apiError(error).message;
      setThread((t) => ({ ...t, status: t.record ? 'ready' : 'error', error: message }));
    }
  };
  const refreshThread = useThrottled(loadThread);
  useEffect(() => {
    loadThread();
  }, []);
  useLive((event) => {
    if (event.type === 'ready') {
      refreshThread();
      messages.refresh();
    } else if (event.type === 'thread' && event.ids.includes(threadId)) refreshThread();
    else if (event.type === 'delivery' && event.delivery.threadId === threadId) messages.refresh();
  });
  const t = thread.record;
  const trouble = useWebhookTrouble(t?.participants.map((p) => p.username) ?? []);
  const holdsChanged = (changed: ThreadHolds) => setThread((v) => (v.record ? { ...v, record: { ...v.record, ...changed } } : v));
  return html`
    <p><a href="/dashboard/threads">All threads</a></p>
    ${t
      ? html`<div class="card thread" data-thread=${t.id}>
          <div class="card-head">
            <h1>${t.title}</h1>
            <span class=${`badge state-${t.state}`}>${THREAD_STATE_LABELS[t.state]}</span>
            ${t.pausedAt ? html`<span class="badge state-closed">Paused</span>` : null}
          </div>
          ${thread.error ? html`<p class="notice problem" role="alert">Could not refresh the thread: ${thread.error}</p>` : null}
          <${PausedBanner} thread=${t} onChanged=${holdsChanged} />
          <${WaitingHere} thread=${t} />
          <${ThreadBody} thread=${t} level=${2} post=${false} />
          <${ThreadHoldSwitch} thread=${t} onChanged=${holdsChanged} />
        </div>`
      : html`<h1>Thread</h1>
          ${thread.status === 'loading'
            ? html`<p class="hint placeholder" role="status">Loading the thread…</p>`
            : html`<div class="notice problem" role="alert"><p>Could not load the thread: ${thread.error}</p>
                <button type="button" onClick=${loadThread}>Try again</button></div>`}`}
    <${WebhookBanners} trouble=${trouble} />
    <div class="messages-head">
      <h2>Messages</h2>
      ${messages.view.items.length > 0 ? html`<a href="#thread-end">${t?.state === 'open' ? 'Go to the newest and reply' : 'Go to the newest'}</a>` : null}
    </div>
    <${ListState} view=${messages.view} noun="messages" onRetry=${messages.reset} empty="No messages in this thread yet." />
    <${MoreButton} list=${messages} noun="messages" />
    <ol class="cards messages">
      ${messages.view.items.toReversed().map((m) => html`<li key=${m.id} class="card message" data-message=${m.id}>
        <div class="card-head">
          <h3>${m.sender}</h3>
          <span class="hint"><${Time} iso=${m.createdAt} /></span>
        </div>
        ${m.summary ? html`<p class="hint">Summary: ${m.summary}</p>` : null}
        <p class="content">${m.content}</p>
        <${Attachments} files=${m.files} />
        <${RecipientBadges} message=${m} />
      </li>`)}
    </ol>
    <div id="thread-end">
      ${t?.state === 'open' ? html`<h2>Reply</h2><${PostForm} thread=${t} />` : null}
    </div>
  `;
}
