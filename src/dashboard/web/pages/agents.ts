import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../shared/api.ts';
import { HealthBadge, WebhookHealth } from './agent-health.ts';
import { useAction } from '../shared/hooks.ts';
import { html, valueOf } from '../shared/html.ts';
import { ListState, MoreButton, usePagedList } from '../shared/lists.ts';
import { useLive } from '../shared/live.ts';
import { query } from '../shared/query.ts';
import { toast } from '../shared/toast.ts';
import type { Agent, CreatedAgent } from '../shared/types.ts';
import { CopyButton, ErrorText, Time } from '../shared/ui.ts';

type OnSecret = (secret: string | null) => void;

function AddWebhook({ agent, onSecret }: { agent: Agent; onSecret: OnSecret }) {
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
      onSecret(added.signingSecret);
      toast('Webhook added; its signing secret is shown below.');
    }
  }
  return html`<form class="inline" onSubmit=${submit}>
    <div class="field">
      <label for=${id}>Webhook URL</label>
      <input id=${id} name="webhookUrl" type="url" required placeholder="https://…" aria-invalid=${action.error ? 'true' : null} aria-describedby=${errorId} />
      <${ErrorText} id=${errorId} error=${action.error?.message} />
    </div>
    <button type="submit" disabled=${action.busy}>Add webhook</button>
  </form>`;
}

function Webhook({ agent, secret, onSecret }: { agent: Agent; secret: string | null; onSecret: OnSecret }) {
  const [action, run] = useAction();
  if (!agent.webhookUrl) return html`<${AddWebhook} agent=${agent} onSecret=${onSecret} />`;
  const name = encodeURIComponent(agent.username);
  return html`<div class="webhook">
    <p>Webhook: <code class="url">${agent.webhookUrl}</code></p>
    <p class="secret">Signing secret: ${secret ? html`<code>${secret}</code> <${CopyButton} text=${() => secret} />` : html`<code class="masked">••••••••••••••••</code> <button type="button" class="quiet" disabled=${action.busy}
        onClick=${async () => {
          const shown = await run(() => api<{ signingSecret: string }>('GET', `/agents/${name}/webhook/secret`));
          if (shown) onSecret(shown.signingSecret);
        }}>Reveal secret</button>`}</p>
    ${agent.health ? html`<${WebhookHealth} agent=${agent} health=${agent.health} />` : null}
    <p><button type="button" class="danger" disabled=${action.busy} onClick=${async () => {
      if (!confirm(`Remove the webhook of ${agent.username}? Its signing secret is discarded for good.`)) return;
      if (await run(() => api('DELETE', `/agents/${name}/webhook`))) {
        onSecret(null);
        toast('Webhook removed.');
      }
    }}>Remove webhook</button></p>
    <${ErrorText} id=${`webhook-error-${agent.username}`} error=${action.error?.message} />
  </div>`;
}

// The MCP clients connected over OAuth to act as this agent; Disconnect ends one at once (its
// tokens stop working at the next call). The list comes with the agent and is redrawn on the live
// `agent` event that a connection's change sends.
function Connections({ agent }: { agent: Agent }) {
  const [action, run] = useAction();
  if (agent.connections.length === 0) return html`<p class="hint">No connected clients.</p>`;
  return html`<div class="connections">
    <h4>Connected clients</h4>
    <ul>
      ${agent.connections.map((c) => {
        const name = c.clientName ?? c.clientId;
        return html`<li key=${c.grantId} class="connection">
          <span class="client">${name}</span>
          <span class="hint">Approved${c.approvedBy ? ` by ${c.approvedBy}` : ''} <${Time} iso=${c.approvedAt} short />${' · '}${c.lastUsedAt
            ? html`last used <${Time} iso=${c.lastUsedAt} short />`
            : 'never used'}</span>
          <button type="button" class="quiet danger" disabled=${action.busy} onClick=${async () => {
            if (!confirm(`Disconnect ${name} from ${agent.username}? It stops working at once; connecting again needs a new approval.`)) return;
            if (await run(() => api('DELETE', `/connections/${encodeURIComponent(c.grantId)}`))) toast(`${name} disconnected.`);
          }}>Disconnect</button>
        </li>`;
      })}
    </ul>
    <${ErrorText} id=${`connections-error-${agent.username}`} error=${action.error?.message} />
  </div>`;
}

function AgentCard({ agent, secret, onSecret }: { agent: Agent; secret: string | null; onSecret: OnSecret }) {
  const [action, run] = useAction();
  const verb = agent.archived ? 'unarchive' : 'archive';
  return html`<li class=${`card agent${agent.archived ? ' archived' : ''}`} data-agent=${agent.username}>
    <div class="card-head">
      <h3>${agent.username}</h3>
      <span class=${`badge ${agent.archived ? 'muted' : 'good'}`}>${agent.archived ? 'Archived' : 'Active'}</span>
      <span class="badge">${agent.webhookUrl ? 'Webhook' : 'Polling'}</span>
      ${agent.health ? html`<${HealthBadge} health=${agent.health} />` : null}
    </div>
    <p class="hint">Registered <${Time} iso=${agent.createdAt} /> · <a href=${`/dashboard/deliveries?agent=${encodeURIComponent(agent.username)}`}>Deliveries</a></p>
    <${Webhook} agent=${agent} secret=${secret} onSecret=${onSecret} />
    <${Connections} agent=${agent} />
    <p>
      <button type="button" class=${agent.archived ? '' : 'danger'} disabled=${action.busy} onClick=${async () => {
        if (await run(() => api('POST', `/agents/${encodeURIComponent(agent.username)}/${verb}`))) toast(`${agent.username} ${verb}d.`);
      }}>${agent.archived ? 'Unarchive' : 'Archive'}</button>
    </p>
    <${ErrorText} id=${`agent-error-${agent.username}`} error=${action.error?.message} />
  </li>`;
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

export function AgentsPage() {
  const [filters, setFilters] = useState({ q: new URLSearchParams(location.search).get('q') ?? '' });
  const [created, setCreated] = useState<CreatedAgent | null>(null);
  const [secrets, setSecrets] = useState<Record<string, string | null>>({});
  const list = usePagedList<Agent>('/agents', filters);
  useEffect(() => history.replaceState(null, '', query(filters) || location.pathname), [filters.q]);
  useLive((event) => (event.type === 'agent' || event.type === 'ready') && list.refresh());
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
        setFilters({ q: valueOf(event.currentTarget as HTMLFormElement, 'q').trim() });
      }}>
        <div class="field wide">
          <label for="agents-q">Name contains</label>
          <input id="agents-q" name="q" type="search" defaultValue=${filters.q} />
        </div>
        <div class="buttons"><button type="submit">Find</button></div>
      </form>
      <${ListState} view=${list.view} noun="agents" onRetry=${list.reset} empty=${filters.q ? 'No agent name contains that.' : 'No agents yet: register the first above.'} />
      <ul class="cards">
        ${list.view.items.map((a) => html`<${AgentCard} key=${a.username} agent=${a} secret=${secrets[a.username] ?? null}
          onSecret=${(secret: string | null) => setSecrets((s) => ({ ...s, [a.username]: secret }))} />`)}
      </ul>
      <${MoreButton} list=${list} noun="agents" />
    </section>
  `;
}
