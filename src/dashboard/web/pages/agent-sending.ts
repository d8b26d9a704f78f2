import { useEffect, useState } from 'preact/hooks';
import { api, apiError } from '../shared/api.ts';
import { useAction } from '../shared/hooks.ts';
import { html, valueOf } from '../shared/html.ts';
import { useLive } from '../shared/live.ts';
import { toast } from '../shared/toast.ts';
import type { AgentGovernance, SendQuotas } from '../shared/types.ts';
import { ErrorText } from '../shared/ui.ts';

// How much an agent may send and whether its messages wait for a person (src/domain/agents/
// governance.ts): read when its detail opens, and again when a change to it is heard.

const FIELDS = [
  { name: 'messagesPerMinute', label: 'Messages per minute', unit: 'messages a minute' },
  { name: 'threadsPerHour', label: 'New threads per hour', unit: 'new threads an hour' },
] as const;

// The deployment's default in words: 0 is no quota at all.
const defaultText = (n: number) => (n === 0 ? 'no quota' : String(n));

function quotaSentence(g: AgentGovernance, field: (typeof FIELDS)[number]) {
  const own = g[field.name];
  const fallback = g.defaults[field.name];
  if (own !== null) return `at most ${own} ${field.unit} (its own quota)`;
  return fallback === 0 ? `any number of ${field.unit} (the deployment's default: no quota)` : `at most ${fallback} ${field.unit} (the deployment's default)`;
}

function Quotas({ governance, onSaved }: { governance: AgentGovernance; onSaved: (quotas: SendQuotas) => void }) {
  const [action, run] = useAction();
  const name = governance.username;
  const errorField = action.error?.field ?? null;
  async function submit(event: SubmitEvent) {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    // An empty field is the deployment's default.
    const quota = (field: string) => (valueOf(form, field).trim() === '' ? null : Number(valueOf(form, field)));
    const saved = await run(() =>
      api<SendQuotas>('PUT', `/agents/${encodeURIComponent(name)}/quotas`, {
        messagesPerMinute: quota('messagesPerMinute'),
        threadsPerHour: quota('threadsPerHour'),
      }),
    );
    if (saved) {
      onSaved(saved);
      toast(`${name}'s quotas saved.`);
    }
  }
  return html`<form class="inline quotas" key=${`${governance.messagesPerMinute}/${governance.threadsPerHour}`} onSubmit=${submit}>
    ${FIELDS.map((f) => {
      const id = `${f.name}-${name}`;
      const hintId = `${id}-hint`;
      const errorId = `${id}-error`;
      const failed = errorField === f.name;
      return html`<div class="field" key=${f.name}>
        <label for=${id}>${f.label}</label>
        <input id=${id} name=${f.name} type="number" min="1" step="1" inputmode="numeric" defaultValue=${governance[f.name] ?? ''}
          placeholder=${`Default: ${defaultText(governance.defaults[f.name])}`} aria-invalid=${failed ? 'true' : null}
          aria-describedby=${failed ? `${hintId} ${errorId}` : hintId} />
        <small id=${hintId}>Empty: the deployment's default (${defaultText(governance.defaults[f.name])}).</small>
        ${failed ? html`<${ErrorText} id=${errorId} error=${action.error?.message} />` : null}
      </div>`;
    })}
    <button type="submit" disabled=${action.busy}>Save quotas</button>
    ${errorField === null ? html`<${ErrorText} id=${`quotas-error-${name}`} error=${action.error?.message} />` : null}
  </form>`;
}

function HoldSwitch({ governance, onSaved }: { governance: AgentGovernance; onSaved: (holds: boolean) => void }) {
  const [action, run] = useAction();
  const name = governance.username;
  const id = `holds-${name}`;
  // Shows the person's choice while it is saved; a refused one goes back to what is stored.
  const [asked, setAsked] = useState<boolean | null>(null);
  async function change(event: Event) {
    const holds = (event.currentTarget as HTMLInputElement).checked;
    setAsked(holds);
    const saved = await run(() => api<{ holdsMessages: boolean }>('PUT', `/agents/${encodeURIComponent(name)}/holds`, { holds }));
    setAsked(null);
    if (saved) {
      onSaved(saved.holdsMessages);
      toast(holds ? `${name}'s messages now wait for approval.` : `${name}'s messages no longer wait for approval.`);
    }
  }
  return html`<div class="switch-row">
    <label class="check" for=${id}>
      <input id=${id} type="checkbox" role="switch" checked=${asked ?? governance.holdsMessages} disabled=${action.busy} onChange=${change}
        aria-describedby=${`${id}-hint`} />
      Its messages wait for approval
    </label>
    <small id=${`${id}-hint`}>${governance.holdsMessages
      ? `Each message ${name} sends is held until a person approves it; no recipient sees it before.`
      : `Off: ${name}'s messages go straight to their recipients.`}</small>
    <${ErrorText} id=${`holds-error-${name}`} error=${action.error?.message} />
  </div>`;
}

export function Sending({ username }: { username: string }) {
  const [governance, setGovernance] = useState<AgentGovernance | null>(null);
  const [error, setError] = useState<string | null>(null);
  const headingId = `sending-heading-${username}`;
  const load = async () => {
    try {
      setGovernance(await api<AgentGovernance>('GET', `/agents/${encodeURIComponent(username)}/governance`));
      setError(null);
    } catch (e) {
      setError(apiError(e).message);
    }
  };
  useEffect(() => void load(), [username]);
  useLive((event) => (event.type === 'agent' || event.type === 'ready') && load());
  const g = governance;
  return html`<section class="sending" aria-labelledby=${headingId}>
    <h3 id=${headingId}>Sending<span class="sr"> of ${username}</span></h3>
    ${error ? html`<p class="error" role="alert">Could not read its sending settings: ${error}</p>` : null}
    ${g
      ? html`<p>${username} may send ${quotaSentence(g, FIELDS[0])} and open ${quotaSentence(g, FIELDS[1])}; past either, what it sends is refused until the minute or the hour is over.</p>
          <${Quotas} governance=${g} onSaved=${(q: SendQuotas) => setGovernance({ ...g, ...q })} />
          <${HoldSwitch} governance=${g} onSaved=${(holds: boolean) => setGovernance({ ...g, holdsMessages: holds })} />`
      : error
        ? null
        : html`<p class="hint" role="status">Loading…</p>`}
  </section>`;
}
