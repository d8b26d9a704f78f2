import type { Sql } from '../db/connect';
import type { InboxSignal } from '../db/inbox-signal';
import type { Agent } from '../domain/agents/actors';
import { credentialExpiresAt, credentialStillAnswers, refusal } from '../domain/agents/authentication';
import type { Logger } from '../log';

type Deps = { sql: Sql; inboxSignal: InboxSignal; log: Logger };

// A credential's expiry is the database's time; a held request asks a moment after it.
const EXPIRY_MARGIN_MS = 1_000;
// The longest delay a timer takes; a later time is waited for in steps.
const LONGEST_TIMER_MS = 2_147_483_647;

// Runs `run` at the time `when` (ms since 1970), however far; answers how to cancel it.
function at(when: number, run: () => void): () => void {
  let timer: ReturnType<typeof setTimeout>;
  const arm = () => {
    const left = when - Date.now();
    timer = setTimeout(left > LONGEST_TIMER_MS ? arm : run, Math.max(0, Math.min(left, LONGEST_TIMER_MS)));
  };
  arm();
  return () => clearTimeout(timer);
}

// A credential that expires (an agent key with an expiry, an OAuth access token) stops answering
// without a word from the database: the held request asks again then. Answers how to cancel.
export const askAgainAtExpiry = (expiresAt: Date | null, askAgain: () => void): (() => void) =>
  expiresAt ? at(expiresAt.getTime() + EXPIRY_MARGIN_MS, askAgain) : () => {};

// What a stream held open for an agent (the event stream, MCP's GET stream, A2A's streams) does
// when the agent changes (ams_agents: archived, a key revoked or given another expiry, another
// name, an OAuth client disconnected): asks whether the credential it was opened with still
// answers for it, and ends if not, or if the question cannot be answered. Stopping wakes every
// stream: they end with the process, with no question to ask.
export function endWhenRevoked({ sql, inboxSignal, log }: Deps, agent: Agent, request: Request, end: () => void, accessTokenResource?: string) {
  return () => {
    if (inboxSignal.stopped()) return end();
    credentialStillAnswers(sql, agent, request.headers.get('authorization'), accessTokenResource).then(
      (answers) => answers || end(),
      (error: Error) => {
        log.warn('stream_credential_check_failed', { error: error.message });
        end();
      },
    );
  };
}

// A wait held open for an agent (the inbox's `wait`, receipts' `waitFor`) ends at once when the
// key it was made with is revoked or expires, or its agent is archived, on whichever instance:
// `work` is given a signal that aborts then (or when the client leaves), and the wait answers 401
// as authentication would now. A request that does not wait (`waits` false) watches nothing.
export async function whileCredentialAnswers<T>(deps: Deps, agent: Agent, request: Request, waits: boolean, work: (abort: AbortSignal) => Promise<T>): Promise<T> {
  if (!waits) return work(request.signal);
  const stop = new AbortController();
  let revoked = false;
  const end = () => {
    revoked = true;
    stop.abort();
  };
  const leave = () => stop.abort();
  request.signal.addEventListener('abort', leave);
  // Stopping wakes the wait itself, which answers with what it finds: that is no revocation.
  const check = endWhenRevoked(deps, agent, request, end);
  const askAgain = () => deps.inboxSignal.stopped() || check();
  const unwatch = deps.inboxSignal.watchAgent(agent.id, askAgain);
  const cancelExpiry = askAgainAtExpiry(await credentialExpiresAt(deps.sql, agent, request.headers.get('authorization')), askAgain);
  try {
    const answer = await work(stop.signal);
    if (revoked) throw refusal(agent);
    return answer;
  } finally {
    cancelExpiry();
    unwatch?.();
    request.signal.removeEventListener('abort', leave);
  }
}
