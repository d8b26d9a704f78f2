import { useEffect, useState } from 'preact/hooks';
import { api } from '../shared/api.ts';
import { html } from '../shared/html.ts';
import { useThrottled } from '../shared/hooks.ts';
import { useLive } from '../shared/live.ts';
import type { Presence } from '../shared/types.ts';
import { Time, plural } from '../shared/ui.ts';

// Whether an agent is online now (holding a stream or a wait on any instance) and when it was last
// seen (src/domain/agents/presence.ts): a dot that never speaks by colour alone, and the time.
export function PresenceCell({ presence }: { presence: Presence }) {
  return html`<span class=${`presence ${presence.online ? 'online' : 'offline'}`}>
    <span class="dot" aria-hidden="true"></span>
    ${presence.online
      ? 'Online'
      : presence.lastSeenAt
        ? html`<span>Seen <${Time} iso=${presence.lastSeenAt} /></span>`
        : html`<span class="hint">Never seen</span>`}
  </span>`;
}

// The Overview's count of agents online, read again as the live stream reports changes, at most
// once every few seconds.
export function AgentsOnline() {
  const [online, setOnline] = useState<number | null>(null);
  const load = () => api<{ online: number }>('GET', '/presence').then((p) => setOnline(p.online), () => {});
  const refresh = useThrottled(load, 5_000);
  useEffect(() => void load(), []);
  useLive(refresh);
  if (online === null) return null;
  return html`<p class="agents-online" data-online=${online}>
    <span class=${`presence ${online > 0 ? 'online' : 'offline'}`}><span class="dot" aria-hidden="true"></span></span>
    <a href="/dashboard/agents">${plural(online, 'agent', 'agents')} online</a>
    <span class="hint"> — holding an event stream, an MCP stream or a wait right now</span>
  </p>`;
}
