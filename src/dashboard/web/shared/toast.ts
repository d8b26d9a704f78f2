import { $ } from './html.ts';

let timer: ReturnType<typeof setTimeout> | undefined;

// A short note at the foot of the page that goes away by itself.
export function toast(text: string, kind: 'ok' | 'error' = 'ok') {
  const box = $('#toast');
  box.textContent = text;
  box.className = `show ${kind}`;
  clearTimeout(timer);
  timer = setTimeout(() => (box.className = ''), 5000);
}
