import { useState } from 'preact/hooks';
import { api } from '../shared/api.ts';
import { useAction } from '../shared/hooks.ts';
import { html, valueOf } from '../shared/html.ts';
import { toast } from '../shared/toast.ts';
import type { Agent } from '../shared/types.ts';
import { ErrorText, Time } from '../shared/ui.ts';

// Rotating a webhook's signing secret (src/domain/agents/signing-secrets.ts): a new secret signs at
// once and the old one keeps signing beside it for the grace chosen, so that the handler can be
// given the new secret without refusing a doorbell meanwhile. The endpoint stays the same one: its
// health and waiting doorbells are untouched, as they would not be by removing and re-adding it.

type Rotated = { signingSecret: string; previousSecretExpiresAt: string | null };

// The choices the API takes as `grace`; the first leaves it to the deployment (WEBHOOK_SECRET_GRACE_MS).
const GRACES: [string, string][] = [
  ['', "The deployment's default"],
  ['0', 'None: the old secret stops at once'],
  ['1h', '1 hour'],
  ['24h', '24 hours'],
  ['3d', '3 days'],
  ['7d', '7 days'],
];

export function RotateSecret({ agent, onRotated }: { agent: Agent; onRotated: (secret: string) => void }) {
  const [open, setOpen] = useState(false);
  const [action, run] = useAction();
  const id = `grace-${agent.username}`;
  const errorId = `rotate-error-${agent.username}`;
  async function submit(event: SubmitEvent) {
    event.preventDefault();
    const grace = valueOf(event.currentTarget as HTMLFormElement, 'grace');
    const rotated = await run(() =>
      api<Rotated>('POST', `/agents/${encodeURIComponent(agent.username)}/webhook/rotate-secret`, grace === '' ? {} : { grace }),
    );
    if (!rotated) return;
    setOpen(false);
    onRotated(rotated.signingSecret);
    toast(
      rotated.previousSecretExpiresAt
        ? `Secret rotated; the new one is shown below. The old one verifies until ${new Date(rotated.previousSecretExpiresAt).toLocaleString()}.`
        : 'Secret rotated; the new one is shown below. The old one no longer verifies.',
    );
  }
  return html`${agent.previousSecretExpiresAt
      ? html`<p class="hint grace">Doorbells are signed with the previous secret too until <${Time} iso=${agent.previousSecretExpiresAt} short />.</p>`
      : null}
    ${open
      ? html`<form class="inline rotate-secret" onSubmit=${submit}>
          <div class="field">
            <label for=${id}>The old secret keeps verifying for</label>
            <select id=${id} name="grace" aria-describedby=${`${errorId} grace-hint-${agent.username}`}>
              ${GRACES.map(([value, label]) => html`<option value=${value}>${label}</option>`)}
            </select>
            <p class="hint" id=${`grace-hint-${agent.username}`}>Give the handler the new secret before then. Rotating again meanwhile stops the oldest secret at once.</p>
            <${ErrorText} id=${errorId} error=${action.error?.message} />
          </div>
          <button type="submit" disabled=${action.busy}>Rotate secret</button>
          <button type="button" class="quiet" onClick=${() => setOpen(false)}>Cancel</button>
        </form>`
      : html`<button type="button" class="quiet" onClick=${() => setOpen(true)}>Rotate secret</button>`}`;
}
