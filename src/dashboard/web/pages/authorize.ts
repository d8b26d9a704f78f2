import { useEffect, useState } from 'preact/hooks';
import { api, apiError } from '../shared/api.ts';
import { useAction } from '../shared/hooks.ts';
import { html } from '../shared/html.ts';
import type { ConsentRequest } from '../shared/types.ts';
import { ErrorText } from '../shared/ui.ts';

const hostOf = (url: string) => {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
};

// Up to this many agents are read at a glance; more, and a search box narrows them as one types.
const HANDFUL = 6;

// Agent names are lowercase (src/domain/shared/schemas.ts): lowering what was typed ignores case.
const contains = (agent: string, typed: string) => agent.includes(typed.trim().toLowerCase());

function AgentSearch({ typed, onType, matching, total }: { typed: string; onType: (typed: string) => void; matching: number; total: number }) {
  return html`<div class="field agent-search">
    <label for="agent-search">Find an agent by name</label>
    <input id="agent-search" type="search" autocomplete="off" value=${typed} aria-controls="agent-choices" aria-describedby="agent-search-count"
      onInput=${(event: Event) => onType((event.currentTarget as HTMLInputElement).value)}
      onKeyDown=${(event: KeyboardEvent) => {
        // Enter here narrows the list; it must not approve the request.
        if (event.key === 'Enter') event.preventDefault();
      }} />
    <p id="agent-search-count" class="hint" role="status">${!typed.trim()
      ? `${total} agents.`
      : matching === 0
        ? `No agent's name contains “${typed.trim()}”.`
        : `${matching} of ${total} agents match.`}</p>
  </div>`;
}

function AgentChoice({ agents, chosen, invalid, onChoose }: { agents: string[]; chosen: string; invalid: boolean; onChoose: (agent: string) => void }) {
  const [typed, setTyped] = useState('');
  const searchable = agents.length > HANDFUL;
  const matching = agents.filter((a) => contains(a, typed));
  // The chosen agent stays in sight, and chosen, whatever is typed.
  const shown = new Set(searchable ? [...matching, chosen] : agents);
  return html`<fieldset class="choices" aria-describedby="agent-error" aria-invalid=${invalid ? 'true' : null}>
    <legend>Act as</legend>
    ${agents.length === 0
      ? html`<p class="hint">There is no active agent to choose. Register one on the <a href="/dashboard/agents">Agents page</a>,
          then connect again from the client; or deny this request.</p>`
      : null}
    ${searchable ? html`<${AgentSearch} typed=${typed} onType=${setTyped} matching=${matching.length} total=${agents.length} />` : null}
    <div id="agent-choices" class="choice-list">
      ${agents.map((a) => html`<label class="check" key=${a} hidden=${!shown.has(a)}>
          <input type="radio" name="agent" value=${a} checked=${chosen === a} onChange=${() => onChoose(a)} /> ${a}
        </label>`)}
    </div>
  </fieldset>`;
}

type RequestView = { status: 'loading' | 'ready' | 'error'; request: ConsentRequest | null; error: string | null };

// An MCP client asks to act as one of the agents (src/oauth). The person sees who asks and, most
// plainly, where the browser goes back to (a lookalike shows there), picks the agent, and approves
// or denies; the answer is the address to continue at. The request is read from and decided at
// this page's own address, where the server ties it to the browser that started it.
export function AuthorizePage() {
  const here = location.pathname.replace(/\/+$/, '');
  const [view, setView] = useState<RequestView>({ status: 'loading', request: null, error: null });
  const [agent, setAgent] = useState('');
  const [unchosen, setUnchosen] = useState(false);
  const [action, run] = useAction();
  async function load() {
    setView({ status: 'loading', request: null, error: null });
    try {
      setView({ status: 'ready', request: await api<ConsentRequest>('GET', `${here}/request`), error: null });
    } catch (error) {
      setView({ status: 'error', request: null, error: apiError(error).message });
    }
  }
  useEffect(() => void load(), []);
  if (view.status === 'loading') return html`<h1>Connect a client</h1><p class="hint placeholder" role="status">Loading the request…</p>`;
  if (view.status === 'error' || !view.request) {
    return html`<h1>Connect a client</h1>
      <div class="notice problem" role="alert"><p>${view.error}</p><button type="button" onClick=${load}>Try again</button></div>`;
  }
  const { client, resource, agents } = view.request;
  const name = client.name ?? 'an unnamed client';
  // A refusal about the agent chosen is shown beside the choice; any other beside the buttons.
  const aboutAgent = action.error?.field === 'agent';
  const agentError = unchosen ? 'Choose the agent the client will act as.' : aboutAgent ? action.error!.message : null;
  const otherError = action.error && !aboutAgent ? action.error.message : null;
  async function decide(decision: 'approve' | 'deny') {
    if (decision === 'approve' && !agent) return setUnchosen(true);
    const decided = await run(() => api<{ redirectTo: string }>('POST', `${here}/decision`, decision === 'approve' ? { decision, agent } : { decision }));
    if (decided) location.assign(decided.redirectTo);
  }
  return html`
    <h1>Connect ${name}</h1>
    <section class="card consent" aria-label="Authorization request">
      <p><strong>${name}</strong> asks to act as one of your agents. It will read and send that agent's messages over MCP
        at <code>${resource}</code> until someone disconnects it on the Agents page.</p>
      <dl class="facts">
        <dt>After you decide, you return to</dt>
        <dd><strong class="return-host">${hostOf(client.redirectUri)}</strong> <code class="url">${client.redirectUri}</code></dd>
        ${client.uri ? html`<dt>Client website</dt><dd><code class="url">${client.uri}</code></dd>` : null}
        ${client.metadataDocument
          ? html`<dt>Client published by</dt>
              <dd><strong class="return-host">${hostOf(client.clientId)}</strong> <code class="url">${client.clientId}</code></dd>`
          : html`<dt>Client id</dt>
              <dd><code class="small">${client.clientId}</code></dd>`}
      </dl>
      <form class="stack" onSubmit=${(event: SubmitEvent) => {
        event.preventDefault();
        decide('approve');
      }}>
        <${AgentChoice} agents=${agents} chosen=${agent} invalid=${!!agentError} onChoose=${(a: string) => {
          setAgent(a);
          setUnchosen(false);
        }} />
        <${ErrorText} id="agent-error" error=${agentError} />
        <div class="buttons">
          <button type="submit" disabled=${action.busy || agents.length === 0}>Approve</button>
          <button type="button" class="quiet" disabled=${action.busy} onClick=${() => decide('deny')}>Deny</button>
        </div>
        <${ErrorText} id="decision-error" error=${otherError} />
      </form>
    </section>
  `;
}
