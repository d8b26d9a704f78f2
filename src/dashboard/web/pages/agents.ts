import { useEffect, useRef, useState } from 'preact/hooks';
import type { Ref } from 'preact';
import { api } from '../shared/api.ts';
import { confirmAction, type ConfirmRequest } from '../shared/confirm.ts';
import { HealthBadge, LastHourFigure, refocus, WebhookHealth } from './agent-health.ts';
import { Sending } from './agent-sending.ts';
import { ContactPolicyPanel } from './agent-contacts.ts';
import { RotateSecret } from './agent-secret.ts';
import { KeysPanel } from './agent-keys.ts';
import { PresenceCell } from './agent-presence.ts';
import { ProfilePanel } from './agent-profile.ts';
import { useAction } from '../shared/hooks.ts';
import { html, valueOf } from '../shared/html.ts';
import { ListState, MoreButton, usePagedList } from '../shared/lists.ts';
import { useLive } from '../shared/live.ts';
import { query } from '../shared/query.ts';
import { toast } from '../shared/toast.ts';
import type { Agent, Connection, CreatedAgent } from '../shared/types.ts';
import { CopyButton, ErrorText, Time } from '../shared/ui.ts';

// One row per agent, dense enough to see at a glance whose webhook is failing and why; what can be
// done to an agent (its webhook, its health, its clients, who may contact it, archiving) opens
// beneath its row on demand.

type OnSecret = (secret: string | null) => void;
type HeadingRef = Ref<HTMLHeadingElement>;

// A section's heading takes the focus when the button that had it goes away (a webhook added or
// removed, its secret revealed, a client disconnected), so that the person stays where they were
// rather than at the page's top.
function SectionHeading({ id, text, username, heading }: { id: string; text: string; username: string; heading: HeadingRef }) {
  return html`<h3 id=${id} tabindex="-1" ref=${heading}>${text}<span class="sr"> of ${username}</span></h3>`;
}

function AddWebhook({ agent, onAdded }: { agent: Agent; onAdded: (secret: string) => void }) {
  const [action, run] = useAction();
  const id = `hook-${agent.username}`;
  const errorId = `hook-error-${agent.username}`;
  async function submit(event: SubmitEvent) {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const added = await run(() =>
      api<{ signingSecret: string }>('PUT', `/agents/${encodeURIComponent(agent.username)}/webhook`, { webhookUrl: valueOf(form, 'webhookUrl') }),
    );
    if (added) {
      onAdded(added.signingSecret);
      toast('Webhook added; its signing secret is shown below.');
    }
  }
  return html`<p class="hint">None: ${agent.username} checks its inbox for messages.</p>
    <form class="inline" onSubmit=${submit}>
      <div class="field">
        <label for=${id}>Webhook URL</label>
        <input id=${id} name="webhookUrl" type="url" required placeholder="https://…" aria-invalid=${action.error ? 'true' : null} aria-describedby=${errorId} />
        <${ErrorText} id=${errorId} error=${action.error?.message} />
      </div>
      <button type="submit" disabled=${action.busy}>Add webhook</button>
    </form>`;
}

// What removing a webhook does (src/domain/agents/agents.ts removeWebhook; a doorbell is owed only
// while the agent has a webhook, delivery-steps.ts).
const removeWebhookRequest = (agent: Agent): ConfirmRequest => ({
  title: `Remove ${agent.username}'s webhook?`,
  body: [
    'Its signing secret is discarded for good: a webhook added later gets a new secret, which its handler must be given.',
    `No more doorbells are sent, not even for deliveries still waiting for one: ${agent.username} goes back to polling and finds them in its inbox.`,
    ...(agent.health ? ['Its health figures are cleared.'] : []),
  ],
  confirm: 'Remove webhook',
  danger: true,
});

function Webhook({ agent, secret, onSecret }: { agent: Agent; secret: string | null; onSecret: OnSecret }) {
  const [action, run] = useAction();
  const heading = useRef<HTMLHeadingElement>(null);
  const name = encodeURIComponent(agent.username);
  const headingId = `webhook-heading-${agent.username}`;
  async function remove() {
    if (!(await confirmAction(removeWebhookRequest(agent)))) return;
    if (await run(() => api('DELETE', `/agents/${name}/webhook`))) {
      onSecret(null);
      toast('Webhook removed.');
      refocus(heading.current);
    }
  }
  async function reveal() {
    const shown = await run(() => api<{ signingSecret: string }>('GET', `/agents/${name}/webhook/secret`));
    if (shown) onSecret(shown.signingSecret);
    refocus(heading.current);
  }
  function added(secret: string) {
    onSecret(secret);
    refocus(heading.current);
  }
  return html`<section class="agent-webhook" aria-labelledby=${headingId}>
    <${SectionHeading} id=${headingId} text="Webhook" username=${agent.username} heading=${heading} />
    ${agent.webhookUrl
      ? html`<p class="inline-center"><code class="url">${agent.webhookUrl}</code>
            <button type="button" class="quiet danger" disabled=${action.busy} onClick=${remove}>Remove webhook</button></p>
          <p class="secret">Signing secret: ${secret
            ? html`<code>${secret}</code> <${CopyButton} text=${() => secret} />`
            : html`<code class="masked">••••••••••••••••</code> <button type="button" class="quiet" disabled=${action.busy} onClick=${reveal}>Reveal secret</button>`}</p>
          <div class="rotation"><${RotateSecret} agent=${agent} onRotated=${added} /></div>
          <${ErrorText} id=${`webhook-error-${agent.username}`} error=${action.error?.message} />
          ${agent.health ? html`<${WebhookHealth} agent=${agent} health=${agent.health} />` : null}`
      : html`<${AddWebhook} agent=${agent} onAdded=${added} />`}
  </section>`;
}

// What disconnecting does (src/domain/oauth/oauth-connections.ts: a token answers only while its
// connection exists).
const disconnectRequest = (agent: Agent, client: string): ConfirmRequest => ({
  title: `Disconnect ${client} from ${agent.username}?`,
  body: [
    `${client} can no longer act as ${agent.username}: its next call is refused, and its refresh token stops working.`,
    'Connecting it again takes a new approval on the consent page.',
  ],
  confirm: 'Disconnect',
  danger: true,
});

const clientName = (c: Connection) => c.clientName ?? c.clientId;

// The MCP clients connected over OAuth to act as this agent. The list comes with the agent and is
// redrawn on the live `agent` event that a connection's change sends.
function Connections({ agent }: { agent: Agent }) {
  const [action, run] = useAction();
  const heading = useRef<HTMLHeadingElement>(null);
  const headingId = `connections-heading-${agent.username}`;
  async function disconnect(c: Connection) {
    const name = clientName(c);
    if (!(await confirmAction(disconnectRequest(agent, name)))) return;
    if (await run(() => api('DELETE', `/connections/${encodeURIComponent(c.grantId)}`))) {
      toast(`${name} disconnected.`);
      refocus(heading.current);
    }
  }
  return html`<section class="connections" aria-labelledby=${headingId}>
    <${SectionHeading} id=${headingId} text="Connected clients" username=${agent.username} heading=${heading} />
    ${agent.connections.length === 0
      ? html`<p class="hint">No connected clients.</p>`
      : html`<ul>
          ${agent.connections.map((c) => html`<li key=${c.grantId} class="connection">
            <span class="client">${clientName(c)}</span>
            <span class="hint">Approved${c.approvedBy ? ` by ${c.approvedBy}` : ''} <${Time} iso=${c.approvedAt} short />${' · '}${c.lastUsedAt
              ? html`last used <${Time} iso=${c.lastUsedAt} short />`
              : 'never used'}</span>
            <button type="button" class="quiet danger" disabled=${action.busy} onClick=${() => disconnect(c)}>Disconnect</button>
          </li>`)}
        </ul>`}
    <${ErrorText} id=${`connections-error-${agent.username}`} error=${action.error?.message} />
  </section>`;
}

// Whether the agent's A2A card is served to anyone (docs/reference/a2a.md): the agent's address for A2A
// clients, and the owner's choice to let strangers read its card.
function A2ACard({ agent }: { agent: Agent }) {
  const [action, run] = useAction();
  const heading = useRef<HTMLHeadingElement>(null);
  const headingId = `a2a-heading-${agent.username}`;
  const address = `${location.origin}/a2a/agents/${encodeURIComponent(agent.username)}/`;
  async function toggle() {
    const listed = !agent.cardListed;
    if (await run(() => api('PUT', `/agents/${encodeURIComponent(agent.username)}/a2a-card`, { listed }))) {
      toast(listed ? `${agent.username}'s A2A card is listed.` : `${agent.username}'s A2A card is for agents of this service only.`);
      refocus(heading.current);
    }
  }
  return html`<section class="a2a-card" aria-labelledby=${headingId}>
    <${SectionHeading} id=${headingId} text="A2A card" username=${agent.username} heading=${heading} />
    <p class="hint">A2A clients reach ${agent.username} at <code>${address}</code> <${CopyButton} text=${() => address} /></p>
    <p>${agent.cardListed
      ? 'Listed: anyone may read its card, which names it and how to send it a message.'
      : 'Not listed: only agents of this service, with their key, may read its card; to anyone else the name does not exist.'}</p>
    <button type="button" disabled=${action.busy} onClick=${toggle}>${agent.cardListed ? 'Stop listing' : 'List the card publicly'}</button>
    <${ErrorText} id=${`a2a-error-${agent.username}`} error=${action.error?.message} />
  </section>`;
}

// What archiving does: every key is refused (src/domain/agents/authentication.ts), a post creates no
// delivery for an archived participant (src/domain/messages/messages.ts), no doorbell is owed to it
// (delivery-steps.ts), and its OAuth connections end for good (sql/015_oauth.sql).
const clientsEnd = (clients: string[]) =>
  `${clients.length === 1 ? `Its connected client, ${clients[0]}, is` : `Its ${clients.length} connected clients (${clients.join(', ')}) are`} disconnected for good: connecting again after an unarchive takes a new approval.`;

function archiveRequest(agent: Agent): ConfirmRequest {
  const clients = agent.connections.map(clientName);
  return {
    title: `Archive ${agent.username}?`,
    body: [
      'Its API keys stop working at once, and it receives no new messages: what is posted to its threads while it is archived never reaches it, even once it is unarchived.',
      ...(agent.webhookUrl ? ['No doorbells go to its webhook while it is archived.'] : []),
      ...(clients.length > 0 ? [clientsEnd(clients)] : []),
      'Unarchive gives its keys back.',
    ],
    confirm: 'Archive',
    danger: true,
  };
}

function Archiving({ agent }: { agent: Agent }) {
  const [action, run] = useAction();
  const button = useRef<HTMLButtonElement>(null);
  const verb = agent.archived ? 'unarchive' : 'archive';
  async function toggle() {
    if (!agent.archived && !(await confirmAction(archiveRequest(agent)))) return;
    const done = await run(() => api('POST', `/agents/${encodeURIComponent(agent.username)}/${verb}`));
    refocus(button.current);
    if (done) toast(`${agent.username} ${verb}d.`);
  }
  return html`<div class="archiving">
    ${agent.archived ? html`<p>Archived: its API keys are refused, and what is posted to its threads does not reach it.</p>` : null}
    <button type="button" ref=${button} class=${agent.archived ? '' : 'danger'} disabled=${action.busy} onClick=${toggle}>${agent.archived ? 'Unarchive' : 'Archive'}</button>
    <${ErrorText} id=${`agent-error-${agent.username}`} error=${action.error?.message} />
  </div>`;
}

// Shown for what does not apply (no webhook): a dash to the eye, words to a screen reader; on a
// phone, where the cells have no columns to keep in line, nothing.
const None = () => html`<span aria-hidden="true">—</span><span class="sr">no webhook</span>`;

const COLUMNS = ['Agent', 'Status', 'Seen', 'Delivery', 'Webhook health', '2xx, last hour', 'Connected clients', 'Registered'];

function AgentRows({ agent, open, onToggle, secret, onSecret }: { agent: Agent; open: boolean; onToggle: () => void; secret: string | null; onSecret: OnSecret }) {
  const detailId = `agent-detail-${agent.username}`;
  const state = agent.health?.state ?? 'none';
  return html`<tbody class=${`agent health-${state}${agent.archived ? ' archived' : ''}${open ? ' open' : ''}`} data-agent=${agent.username}>
    <tr>
      <th scope="row" class="name">${agent.username}</th>
      <td class="badges">${agent.archived ? html`<span class="badge muted">Archived</span>` : 'Active'}</td>
      <td class="seen"><${PresenceCell} presence=${agent.presence} /></td>
      <td class="badges">${agent.webhookUrl ? 'Webhook' : 'Polling'}</td>
      ${agent.health
        ? html`<td class="badges health-cell"><${HealthBadge} health=${agent.health} /></td>
            <td class="figure" data-label="2xx, last hour"><${LastHourFigure} health=${agent.health} /></td>`
        : html`<td class="badges none"><${None} /></td><td class="figure none"><${None} /></td>`}
      <td class="figure" data-label="Connected clients">${agent.connections.length}</td>
      <td class="figure" data-label="Registered"><${Time} iso=${agent.createdAt} short /></td>
      <td class="actions">
        <a href=${`/dashboard/deliveries?agent=${encodeURIComponent(agent.username)}`}>Deliveries<span class="sr"> to ${agent.username}</span></a>
        <button type="button" class="quiet toggle" aria-expanded=${open ? 'true' : 'false'} aria-controls=${detailId} onClick=${onToggle}>
          Manage<span class="sr"> ${agent.username}</span>
        </button>
      </td>
    </tr>
    ${open
      ? html`<tr class="detail-row" id=${detailId}>
          <td colspan=${COLUMNS.length + 1}>
            <${ProfilePanel} agent=${agent} />
            <${Webhook} agent=${agent} secret=${secret} onSecret=${onSecret} />
            <${KeysPanel} username=${agent.username} />
            <${Connections} agent=${agent} />
            <${A2ACard} agent=${agent} />
            <${Sending} username=${agent.username} />
            <${ContactPolicyPanel} username=${agent.username} />
            <${Archiving} agent=${agent} />
          </td>
        </tr>`
      : null}
  </tbody>`;
}

function AgentsTable({ caption, agents, expanded, onToggle, secrets, onSecret }: {
  caption: string;
  agents: Agent[];
  expanded: Set<string>;
  onToggle: (username: string) => void;
  secrets: Record<string, string | null>;
  onSecret: (username: string, secret: string | null) => void;
}) {
  return html`<table class="agents-table">
    <caption class="sr">${caption}</caption>
    <thead>
      <tr>${COLUMNS.map((c) => html`<th scope="col">${c}</th>`)}<th scope="col"><span class="sr">Actions</span></th></tr>
    </thead>
    ${agents.map((a) => html`<${AgentRows} key=${a.username} agent=${a} open=${expanded.has(a.username)} onToggle=${() => onToggle(a.username)}
      secret=${secrets[a.username] ?? null} onSecret=${(secret: string | null) => onSecret(a.username, secret)} />`)}
  </table>`;
}

// A refusal about the webhook is shown beside it; any other (the name, taken or malformed, or
// something else) beside the username.
function RegisterForm({ onCreated }: { onCreated: (agent: CreatedAgent) => void }) {
  const [action, run] = useAction();
  const error = action.error?.message ?? null;
  const field = action.error?.field === 'username' || action.error?.field === 'webhookUrl' ? action.error.field : null;
  async function submit(event: SubmitEvent) {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const created = await run(() =>
      api<CreatedAgent>('POST', '/agents', { username: valueOf(form, 'username'), webhookUrl: valueOf(form, 'webhookUrl') || undefined }),
    );
    if (created) {
      form.reset();
      onCreated(created);
    }
  }
  const describe = (name: 'username' | 'webhookUrl', hint: string | null) =>
    [hint, field === name || (name === 'username' && error && !field) ? 'register-error' : null].filter(Boolean).join(' ') || null;
  return html`<form class="inline" onSubmit=${submit}>
    <div class="field">
      <label for="new-username">Username</label>
      <input id="new-username" name="username" required maxlength="64" pattern="[a-z0-9][a-z0-9_.\\-]*" autocomplete="off"
        aria-invalid=${field === 'username' || (error && !field) ? 'true' : null} aria-describedby=${describe('username', 'username-hint')} />
      <small id="username-hint">Lowercase letters, digits, “.”, “_” or “-”.</small>
      ${field !== 'webhookUrl' ? html`<${ErrorText} id="register-error" error=${error} />` : null}
    </div>
    <div class="field">
      <label for="new-webhook">Webhook URL <span class="hint">(optional)</span></label>
      <input id="new-webhook" name="webhookUrl" type="url" placeholder="https://example.com/hooks/agent"
        aria-invalid=${field === 'webhookUrl' ? 'true' : null} aria-describedby=${describe('webhookUrl', null)} />
      ${field === 'webhookUrl' ? html`<${ErrorText} id="register-error" error=${error} />` : null}
    </div>
    <button type="submit" disabled=${action.busy}>Register</button>
  </form>`;
}

function NewKey({ created }: { created: CreatedAgent }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => box.current?.focus(), [created]);
  return html`<div id="new-key" class="notice" tabindex="-1" ref=${box}>
    <p>API key for <strong id="new-key-agent">${created.username}</strong>. Copy it now: it is shown only once.</p>
    <p class="secret"><code id="new-key-value">${created.apiKey}</code> <${CopyButton} text=${() => created.apiKey} /></p>
    ${created.signingSecret
      ? html`<p>Signing secret: <code id="new-key-secret">${created.signingSecret}</code> <${CopyButton} text=${() => created.signingSecret} /></p>`
      : null}
  </div>`;
}

// The webhook states the list can be narrowed to (GET /agents?health=…), in trouble first.
const HEALTH_CHOICES: [string, string][] = [
  ['', 'Any'],
  ['disabled,failing', 'In trouble'],
  ['disabled', 'Switched off'],
  ['failing', 'Failing'],
  ['paused', 'Paused'],
  ['not-reporting', 'Not reporting'],
  ['slow', 'Slow'],
  ['healthy', 'Healthy'],
  ['untried', 'Not tried yet'],
  ['none', 'No webhook'],
];
const SORTS: [string, string][] = [
  ['', 'Newest first'],
  ['trouble', 'Trouble first'],
];

type AgentFilters = { q: string; health: string; sort: string };

function filtersFromAddress(): AgentFilters {
  const params = new URLSearchParams(location.search);
  const health = params.get('health') ?? '';
  const sort = params.get('sort') ?? '';
  // A link from the Overview may name one state or several; one this page does not offer is kept
  // as a choice of its own, so that the control shows what the list shows.
  return { q: params.get('q') ?? '', health, sort: SORTS.some(([v]) => v === sort) ? sort : '' };
}

export function AgentsPage() {
  const [filters, setFilters] = useState(filtersFromAddress);
  const [created, setCreated] = useState<CreatedAgent | null>(null);
  const [secrets, setSecrets] = useState<Record<string, string | null>>({});
  // A link to one agent (the Overview's, `?q=invoice-agent`) opens that agent's detail.
  const [expanded, setExpanded] = useState(() => new Set<string>(filters.q ? [filters.q] : []));
  const list = usePagedList<Agent>('/agents', filters, { keyOf: (a) => a.cursor });
  useEffect(() => history.replaceState(null, '', query(filters) || location.pathname), [filters.q, filters.health, filters.sort]);
  const healthChoices = HEALTH_CHOICES.some(([v]) => v === filters.health) ? HEALTH_CHOICES : [...HEALTH_CHOICES, [filters.health, filters.health.replaceAll(',', ' or ')] as [string, string]];
  const apply = (form: HTMLFormElement) =>
    setFilters({ q: valueOf(form, 'q').trim(), health: valueOf(form, 'health'), sort: valueOf(form, 'sort') });
  const narrowed = filters.q || filters.health;
  useLive((event) => (event.type === 'agent' || event.type === 'ready') && list.refresh());
  const toggle = (username: string) =>
    setExpanded((open) => {
      const next = new Set(open);
      if (!next.delete(username)) next.add(username);
      return next;
    });
  return html`
    <h1>Agents</h1>
    <section class="card" aria-labelledby="register-heading">
      <h2 id="register-heading">Register an agent</h2>
      <${RegisterForm} onCreated=${(agent: CreatedAgent) => {
        setCreated(agent);
        if (agent.signingSecret) setSecrets((s) => ({ ...s, [agent.username]: agent.signingSecret! }));
        list.refresh();
      }} />
      ${created ? html`<${NewKey} created=${created} />` : null}
    </section>
    <section aria-labelledby="list-heading">
      <h2 id="list-heading">All agents</h2>
      <form class="filters" role="search" aria-label="Find agents" onSubmit=${(event: SubmitEvent) => {
        event.preventDefault();
        apply(event.currentTarget as HTMLFormElement);
      }}>
        <div class="field wide">
          <label for="agents-q">Name contains</label>
          <input id="agents-q" name="q" type="search" defaultValue=${filters.q} />
        </div>
        <div class="field">
          <label for="agents-health">Webhook health</label>
          <select id="agents-health" name="health" value=${filters.health} onChange=${(e: Event) => apply((e.currentTarget as HTMLSelectElement).form!)}>
            ${healthChoices.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
          </select>
        </div>
        <div class="field">
          <label for="agents-sort">Order</label>
          <select id="agents-sort" name="sort" value=${filters.sort} onChange=${(e: Event) => apply((e.currentTarget as HTMLSelectElement).form!)}>
            ${SORTS.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
          </select>
        </div>
        <div class="buttons"><button type="submit">Find</button></div>
      </form>
      <${ListState} view=${list.view} noun="agents" onRetry=${list.reset} empty=${narrowed ? 'No agent matches these filters.' : 'No agents yet: register the first above.'} />
      ${list.view.items.length > 0
        ? html`<${AgentsTable} caption=${filters.sort === 'trouble' ? 'Agents, webhooks in trouble first' : 'Agents, newest first'} agents=${list.view.items} expanded=${expanded} onToggle=${toggle} secrets=${secrets}
            onSecret=${(username: string, secret: string | null) => setSecrets((s) => ({ ...s, [username]: secret }))} />`
        : null}
      <${MoreButton} list=${list} noun="agents" />
    </section>
  `;
}
