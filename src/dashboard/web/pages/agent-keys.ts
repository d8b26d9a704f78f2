import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../shared/api.ts';
import { confirmAction, type ConfirmRequest } from '../shared/confirm.ts';
import { useAction } from '../shared/hooks.ts';
import { html, valueOf } from '../shared/html.ts';
import { toast } from '../shared/toast.ts';
import type { AgentKey, CreatedKey } from '../shared/types.ts';
import { CopyButton, ErrorText, Time } from '../shared/ui.ts';
import { refocus } from './agent-health.ts';

// An agent's keys (src/domain/agents/agent-keys.ts): up to five, each named, listed by the prefix
// it starts with; a new one is shown once, here, and a revoked one is refused at once everywhere.

const MOST_KEYS = 5;

const revokeRequest = (username: string, key: AgentKey): ConfirmRequest => ({
  title: `Revoke ${username}'s key “${key.name}”?`,
  body: [
    `Every request made with it is refused from now on, on every instance${key.prefix ? ` (it starts ${key.prefix})` : ''}: event streams, MCP streams and waits held open with it end.`,
    `${username} keeps its other keys. A revoked key cannot be given back: a new one has to be created and handed to ${username}.`,
  ],
  confirm: 'Revoke key',
  danger: true,
});

// A datetime-local field's value is the person's local time without an offset; the API takes UTC.
const expiryOf = (local: string) => (local ? new Date(local).toISOString() : undefined);

export function KeysPanel({ username }: { username: string }) {
  const [keys, setKeys] = useState<AgentKey[] | null>(null);
  const [created, setCreated] = useState<CreatedKey | null>(null);
  const [action, run] = useAction();
  const heading = useRef<HTMLHeadingElement>(null);
  const shown = useRef<HTMLDivElement>(null);
  const name = encodeURIComponent(username);
  const headingId = `keys-heading-${username}`;
  const errorId = `keys-error-${username}`;
  const load = () => run(() => api<AgentKey[]>('GET', `/agents/${name}/keys`)).then((read) => read && setKeys(read));
  useEffect(() => void load(), [username]);
  useEffect(() => shown.current?.focus(), [created]);

  async function create(event: SubmitEvent) {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const made = await run(() => api<CreatedKey>('POST', `/agents/${name}/keys`, { name: valueOf(form, 'name'), expiresAt: expiryOf(valueOf(form, 'expiresAt')) }));
    if (!made) return;
    form.reset();
    setCreated(made);
    await load();
  }
  async function revoke(key: AgentKey) {
    if (!(await confirmAction(revokeRequest(username, key)))) return;
    if (await run(() => api('DELETE', `/agents/${name}/keys/${encodeURIComponent(key.id)}`))) {
      if (created?.id === key.id) setCreated(null);
      toast(`Key “${key.name}” revoked.`);
      await load();
      refocus(heading.current);
    }
  }
  const expired = (key: AgentKey) => key.expiresAt !== null && Date.parse(key.expiresAt) <= Date.now();

  return html`<section class="agent-keys" aria-labelledby=${headingId}>
    <h3 id=${headingId} tabindex="-1" ref=${heading}>Keys<span class="sr"> of ${username}</span></h3>
    <p class="hint">${username} calls with any of these, at most ${MOST_KEYS}; it can also create and revoke its own through the API. Its last key that has not expired cannot be revoked: archive the agent to shut it out.</p>
    ${keys
      ? html`<table class="keys-table">
          <caption class="sr">Keys of ${username}</caption>
          <thead><tr><th scope="col">Name</th><th scope="col">Starts with</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col"><span class="sr">Actions</span></th></tr></thead>
          <tbody>
            ${keys.map((key) => html`<tr key=${key.id} data-key=${key.name}>
              <th scope="row" class="name">${key.name}</th>
              <td data-label="Starts with">${key.prefix ? html`<code>${key.prefix}…</code>` : html`<span class="hint">not yet known</span>`}</td>
              <td data-label="Created"><${Time} iso=${key.createdAt} short /></td>
              <td data-label="Last used">${key.lastUsedAt ? html`<${Time} iso=${key.lastUsedAt} />` : html`<span class="hint">never</span>`}</td>
              <td data-label="Expires">${key.expiresAt
                ? html`${expired(key) ? html`<span class="badge muted">Expired</span> ` : null}<${Time} iso=${key.expiresAt} />`
                : html`<span class="hint">never</span>`}</td>
              <td class="actions"><button type="button" class="quiet danger" disabled=${action.busy} onClick=${() => revoke(key)}>
                Revoke<span class="sr"> key ${key.name}</span>
              </button></td>
            </tr>`)}
          </tbody>
        </table>`
      : null}
    ${created
      ? html`<div class="notice" tabindex="-1" ref=${shown} data-new-key>
          <p>New key “${created.name}” for <strong>${username}</strong>. Copy it now: it is shown only once.</p>
          <p class="secret"><code>${created.apiKey}</code> <${CopyButton} text=${() => created.apiKey} /></p>
        </div>`
      : null}
    <form class="inline" onSubmit=${create}>
      <div class="field">
        <label for=${`key-name-${username}`}>New key's name</label>
        <input id=${`key-name-${username}`} name="name" required maxlength="64" autocomplete="off" placeholder="laptop 2026-11" aria-describedby=${errorId} />
      </div>
      <div class="field">
        <label for=${`key-expiry-${username}`}>Expires <span class="hint">(optional, your time)</span></label>
        <input id=${`key-expiry-${username}`} name="expiresAt" type="datetime-local" aria-describedby=${errorId} />
      </div>
      <button type="submit" disabled=${action.busy}>Create key</button>
    </form>
    <${ErrorText} id=${errorId} error=${action.error?.message} />
  </section>`;
}
