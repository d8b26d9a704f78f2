import { DASHBOARD_PATH, SESSION_ENDED } from '../../../web/dashboard-protocol.ts';
import { $ } from './html.ts';
import { query } from './query.ts';

// How the session ended, as the sign-in page's `ended` parameter names it.
export type SessionEnd = keyof typeof SESSION_ENDED;

let over = false;
const whenOver: (() => void)[] = [];

export const sessionIsOver = () => over;

// Runs `stop` when the session ends (the live view stops this way).
export const onSessionEnd = (stop: () => void) => void whenOver.push(stop);

// Where "sign in again" leads: the sign-in page, and back here afterwards.
const signInHref = (ended: SessionEnd) => `${DASHBOARD_PATH}/sign-in${query({ next: location.pathname + location.search, ended })}`;

// The session ended: say so and stop the live view, but keep the page as it is, so that nothing
// on it is lost; signing in again comes back to it.
export function sessionEnded(sentence: string, ended: SessionEnd = 'expired') {
  if (over) return;
  over = true;
  for (const stop of whenOver) stop();
  $('#session-ended-text').textContent = sentence;
  $<HTMLAnchorElement>('#sign-in-again').href = signInHref(ended);
  $('#session-ended').hidden = false;
}
