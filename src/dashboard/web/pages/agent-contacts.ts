import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../shared/api.ts';
import { useAction } from '../shared/hooks.ts';
import { html, valueOf } from '../shared/html.ts';
import { toast } from '../shared/toast.ts';
import type { ContactList, Contacts, ContactPolicy } from '../shared/types.ts';
import { ErrorText } from '../shared/ui.ts';
import { refocus } from './agent-health.ts';

// Who may put an agent in a thread (src/domain/agents/contact-policy.ts): its policy, and its allow
// and block lists, which people keep here. Every change answers the agent's whole policy, which is
// then shown as it is stored.

const POLICIES: { value: ContactPolicy; label: string; hint: string; from: string }[] = [
  { value: 'open', label: 'Any agent', hint: 'any agent may open a thread with it or add it to one', from: 'any agent' },
  { value: 'contacts', label: 'Its contacts', hint: 'agents on its allow list, or that already share a thread with it', from: 'its contacts only' },
  { value: 'closed', label: 'Only people', hint: 'no agent may; people put it in threads', from: 'people only' },
];

const LISTS: { list: ContactList; title: string; empty: string }[] = [
  { list: 'allow', title: 'Allow list', empty: 'Nobody yet.' },
  { list: 'block', title: 'Block list', empty: 'Nobody: no agent is refused whatever the policy.' },
];

export function ContactPolicyPanel({ username }: { username: string }) {
  const [contacts, setContacts] = useState<Contacts | null>(null);
  const [chosen, setChosen] = useState<ContactPolicy | null>(null);
  const [action, run] = useAction();
  const heading = useRef<HTMLHeadingElement>(null);
  const name = encodeURIComponent(username);
  const headingId = `contacts-heading-${username}`;
  const errorId = `contacts-error-${username}`;
  const shown = (next: Contacts) => {
    setContacts(next);
    setChosen(next.policy);
  };
  useEffect(() => {
    void run(() => api<Contacts>('GET', `/agents/${name}/contacts`)).then((read) => read && shown(read));
  }, [username]);

  async function change(call: () => Promise<Contacts>, done: (next: Contacts) => string) {
    const next = await run(call);
    if (!next) return false;
    shown(next);
    toast(done(next));
    refocus(heading.current);
    return true;
  }
  async function savePolicy(event: SubmitEvent) {
    event.preventDefault();
    await change(
      () => api<Contacts>('PUT', `/agents/${name}/contact-policy`, { policy: chosen }),
      (next) => `${username} now accepts threads from ${POLICIES.find((p) => p.value === next.policy)!.from}.`,
    );
  }
  async function addContact(event: SubmitEvent) {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const contact = valueOf(form, 'contact').trim();
    const list = valueOf(form, 'list') as ContactList;
    const added = await change(
      () => api<Contacts>('PUT', `/agents/${name}/contacts/${encodeURIComponent(contact)}`, { list }),
      () => `${contact} is on ${username}'s ${list} list.`,
    );
    if (added) form.reset();
  }
  const remove = (contact: string, list: ContactList) =>
    change(
      () => api<Contacts>('DELETE', `/agents/${name}/contacts/${encodeURIComponent(contact)}`),
      () => `${contact} is off ${username}'s ${list} list.`,
    );

  return html`<section class="contact-policy" aria-labelledby=${headingId}>
    <h3 id=${headingId} tabindex="-1" ref=${heading}>Who may contact it<span class="sr"> (${username})</span></h3>
    <p class="hint">Who may put ${username} in a thread. A blocked agent is refused whatever the policy; people are never refused.</p>
    ${contacts
      ? html`<form class="policy-form" onSubmit=${savePolicy}>
            <fieldset class="choices">
              <legend>Agents that may put ${username} in a thread</legend>
              ${POLICIES.map((p) => html`<label class="check" key=${p.value}>
                  <input type="radio" name=${`policy-${username}`} value=${p.value} checked=${chosen === p.value} onChange=${() => setChosen(p.value)} />
                  <span>${p.label} <span class="hint">— ${p.hint}</span></span>
                </label>`)}
            </fieldset>
            <button type="submit" disabled=${action.busy || chosen === contacts.policy}>Save policy</button>
          </form>
          <div class="contact-lists">
            ${LISTS.map(({ list, title, empty }) => html`<div class="contact-list" key=${list} data-list=${list}>
                <h4>${title}</h4>
                ${contacts[list].length === 0
                  ? html`<p class="hint">${empty}</p>`
                  : html`<ul>
                      ${contacts[list].map((contact) => html`<li key=${contact}>
                        <span class="contact">${contact}</span>
                        <button type="button" class="quiet" disabled=${action.busy} onClick=${() => remove(contact, list)}>
                          Remove<span class="sr"> ${contact} from the ${list} list</span>
                        </button>
                      </li>`)}
                    </ul>`}
              </div>`)}
          </div>
          <form class="inline" onSubmit=${addContact}>
            <div class="field">
              <label for=${`contact-${username}`}>Agent to add</label>
              <input id=${`contact-${username}`} name="contact" required maxlength="64" autocomplete="off" aria-describedby=${errorId} />
            </div>
            <div class="field narrow-field">
              <label for=${`contact-list-${username}`}>List</label>
              <select id=${`contact-list-${username}`} name="list">
                <option value="allow">Allow</option>
                <option value="block">Block</option>
              </select>
            </div>
            <button type="submit" disabled=${action.busy}>Add to list</button>
          </form>`
      : null}
    <${ErrorText} id=${errorId} error=${action.error?.message} />
  </section>`;
}
