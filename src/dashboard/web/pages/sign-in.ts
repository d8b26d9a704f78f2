import { SESSION_ENDED } from '../../../web/dashboard-protocol.ts';
import { api, apiError } from '../shared/api.ts';
import { $ } from '../shared/html.ts';

// Back to the page the person came from, if it is a dashboard page.
function nextPage() {
  const next = new URLSearchParams(location.search).get('next') ?? '';
  return /^\/dashboard\/[^/\\]/.test(next) && !next.startsWith('/dashboard/sign-in') ? next : '/dashboard/overview';
}

// The sign-in page is plain HTML (sign-in.html): an email, then the code sent to it.
export function signInPage() {
  const codeForm = $<HTMLFormElement>('#code-form');
  const verifyForm = $<HTMLFormElement>('#verify-form');
  const email = $<HTMLInputElement>('#email');
  const code = $<HTMLInputElement>('#code');
  const error = $('#sign-in-error');
  const ended = new URLSearchParams(location.search).get('ended');
  if (ended) {
    const notice = $('#sign-in-notice');
    notice.textContent = SESSION_ENDED[ended === 'signed-out' ? 'signed-out' : 'expired'].sentence;
    notice.hidden = false;
  }
  const fail = (input: HTMLInputElement, message: string) => {
    error.textContent = message;
    input.setAttribute('aria-invalid', 'true');
  };
  codeForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    email.removeAttribute('aria-invalid');
    try {
      const sent = await api<{ message: string }>('POST', '/sign-in/code', { email: email.value });
      $('#code-sent').textContent = sent.message;
      codeForm.hidden = true;
      verifyForm.hidden = false;
      code.focus();
    } catch (e) {
      fail(email, apiError(e).message);
    }
  });
  verifyForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    code.removeAttribute('aria-invalid');
    try {
      await api('POST', '/sign-in/verify', { email: email.value, code: code.value });
      location.href = nextPage();
    } catch (e) {
      fail(code, apiError(e).message);
      code.select();
    }
  });
  $('#start-over').addEventListener('click', () => {
    verifyForm.hidden = true;
    codeForm.hidden = false;
    error.textContent = '';
    code.value = '';
    email.focus();
  });
}
