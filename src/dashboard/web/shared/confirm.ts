import { render } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import { html } from './html.ts';

export type ConfirmRequest = {
  title: string;
  // What will happen, in sentences; the first is the plainest.
  body: string[];
  confirm: string;
  danger?: boolean;
};

function ConfirmDialog({ request, onClose }: { request: ConfirmRequest; onClose: (ok: boolean) => void }) {
  const box = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    box.current!.showModal();
  }, []);
  return html`<dialog class="confirm" ref=${box} aria-labelledby="confirm-title" aria-describedby="confirm-body"
    onCancel=${(event: Event) => {
      event.preventDefault();
      onClose(false);
    }}>
    <h2 id="confirm-title">${request.title}</h2>
    <div id="confirm-body">${request.body.map((line) => html`<p>${line}</p>`)}</div>
    <div class="buttons">
      <button type="button" class="quiet" autofocus onClick=${() => onClose(false)}>Cancel</button>
      <button type="button" class=${request.danger ? 'danger' : ''} onClick=${() => onClose(true)}>${request.confirm}</button>
    </div>
  </dialog>`;
}

// Asks before an action that cannot be taken back, in the page's own modal dialog (the browser's
// confirm() cannot say what will happen in more than a line, and some browsers let a page silence
// it). Cancel has the focus, so that Enter alone changes nothing; afterwards the focus returns to
// where it was. Answers whether the person confirmed.
export function confirmAction(request: ConfirmRequest): Promise<boolean> {
  const before = document.activeElement as HTMLElement | null;
  const host = document.createElement('div');
  document.body.append(host);
  return new Promise((resolve) => {
    const close = (ok: boolean) => {
      render(null, host);
      host.remove();
      if (before?.isConnected) before.focus();
      resolve(ok);
    };
    render(html`<${ConfirmDialog} request=${request} onClose=${close} />`, host);
  });
}
