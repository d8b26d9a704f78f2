import { useEffect, useState } from 'preact/hooks';
import { api } from './api.ts';
import { html } from './html.ts';
import { useLive } from './live.ts';
import { query } from './query.ts';
import type { WebhookTrouble } from './types.ts';
import { Time } from './ui.ts';

// Where an agent's deliveries are listed (Deliveries, a thread), whether its webhook is in trouble:
// a switched-off webhook makes its deliveries look like any polling agent's, and the person
// looking at them is told so, with the way back.

// The API looks up at most this many names at once (agent-overview.ts WEBHOOK_TROUBLE_NAMES).
const MOST = 100;

// The named agents whose webhook is in trouble, read again when they change (an `agent` event:
// switched off, back on, tested) or the stream reopens.
export function useWebhookTrouble(names: string[]): WebhookTrouble[] {
  const key = [...new Set(names)].sort().slice(0, MOST).join(',');
  const [trouble, setTrouble] = useState<WebhookTrouble[]>([]);
  const [version, setVersion] = useState(0);
  useLive((event) => (event.type === 'agent' || event.type === 'ready') && setVersion((v) => v + 1));
  useEffect(() => {
    if (!key) return setTrouble([]);
    // A banner is an aid, not the page: if it cannot be read, the list still shows.
    api<WebhookTrouble[]>('GET', `/webhook-trouble${query({ agents: key })}`).then(setTrouble, () => setTrouble([]));
  }, [key, version]);
  return trouble;
}

export const healthLink = (username: string) => `/dashboard/agents${query({ q: username })}`;

// One banner per agent whose webhook does not ring: switched off (red), or in a state this page
// does not know (named as the API spells it). A failing webhook still rings, with retries: its
// deliveries say so themselves.
export function WebhookBanners({ trouble }: { trouble: WebhookTrouble[] }) {
  const silent = trouble.filter((t) => t.state !== 'failing');
  return html`${silent.map((t) =>
    t.state === 'disabled'
      ? html`<div key=${t.username} class="notice problem switched-off" role="status" data-switched-off=${t.username}>
          <p><strong>${t.username}'s webhook is switched off</strong>${t.disabledAt ? html` since <${Time} iso=${t.disabledAt} short />` : null}${t.failure
            ? ` (last failure: ${t.failure})`
            : ''}. ${t.disabledReason ?? `No doorbells go to it: ${t.username} polls instead.`} Its deliveries wait in its inbox, listed here as Accepted.</p>
          <p><a href=${healthLink(t.username)}>Open ${t.username}'s webhook health</a> to send it a test event and switch it back on.</p>
        </div>`
      : t.state === 'paused'
        ? html`<div key=${t.username} class="notice webhook-paused switched-off" role="status" data-switched-off=${t.username}>
            <p><strong>${t.username}'s webhook is paused</strong>${t.disabledAt ? html` since <${Time} iso=${t.disabledAt} short />` : null}${t.disabledReason
              ? `: “${t.disabledReason}”`
              : ''}. Its deliveries wait in its inbox, listed here as Accepted.</p>
            <p><a href=${healthLink(t.username)}>Open ${t.username}'s webhook health</a> to resume it.</p>
          </div>`
        : html`<div key=${t.username} class="notice switched-off" role="status" data-switched-off=${t.username}>
            <p><strong>${t.username}'s webhook: ${t.state.replaceAll('-', ' ')}</strong>. <a href=${healthLink(t.username)}>Open its webhook health</a>.</p>
          </div>`,
  )}`;
}
