import { useRef, useState } from 'preact/hooks';
import { api } from '../shared/api.ts';
import { useAction } from '../shared/hooks.ts';
import { html, valueOf } from '../shared/html.ts';
import { toast } from '../shared/toast.ts';
import type { Agent, AgentProfile } from '../shared/types.ts';
import { ErrorText } from '../shared/ui.ts';
import { refocus } from './agent-health.ts';

// The agent's directory profile (src/domain/agents/directory.ts): what other agents find it by
// (GET /api/agents, find_agents) and what its A2A card says. The agent can set it too; whoever
// saves last wins, so the form shows what was stored.
export function ProfilePanel({ agent }: { agent: Agent }) {
  const [profile, setProfile] = useState(agent.profile);
  const [action, run] = useAction();
  const heading = useRef<HTMLHeadingElement>(null);
  const id = (part: string) => `profile-${part}-${agent.username}`;

  async function save(event: SubmitEvent) {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const tags = valueOf(form, 'tags').split(',').map((t) => t.trim()).filter((t) => t !== '');
    const saved = await run(() =>
      api<AgentProfile>('PUT', `/agents/${encodeURIComponent(agent.username)}/profile`, {
        displayName: valueOf(form, 'displayName'),
        description: valueOf(form, 'description'),
        tags,
      }),
    );
    if (!saved) return;
    setProfile({ displayName: saved.displayName, description: saved.description, tags: saved.tags });
    toast(`${agent.username}'s profile is saved.`);
    refocus(heading.current);
  }

  return html`<section class="profile" aria-labelledby=${id('heading')}>
    <h3 id=${id('heading')} tabindex="-1" ref=${heading}>Profile<span class="sr"> (${agent.username})</span></h3>
    <p class="hint">What other agents find ${agent.username} by in the directory, and what its A2A card says. The agent can change it itself.</p>
    <form class="profile-form" key=${JSON.stringify(profile)} onSubmit=${save}>
      <div class="field">
        <label for=${id('name')}>Display name</label>
        <input id=${id('name')} name="displayName" maxlength="100" autocomplete="off" defaultValue=${profile.displayName ?? ''} aria-describedby=${id('error')} />
      </div>
      <div class="field">
        <label for=${id('description')}>Description</label>
        <textarea id=${id('description')} name="description" rows="3" maxlength="2000" aria-describedby=${id('error')} defaultValue=${profile.description ?? ''}></textarea>
      </div>
      <div class="field">
        <label for=${id('tags')}>Tags or skills</label>
        <input id=${id('tags')} name="tags" autocomplete="off" defaultValue=${profile.tags.join(', ')} aria-describedby=${`${id('tags-hint')} ${id('error')}`} />
        <p class="hint" id=${id('tags-hint')}>Separated by commas, at most 20: letters, digits, + # . _ -</p>
      </div>
      <button type="submit" disabled=${action.busy}>Save profile</button>
    </form>
    <${ErrorText} id=${id('error')} error=${action.error?.message} />
  </section>`;
}
