import type { Sql } from '../db/connect';
import type { InboxSignal } from '../db/inbox-signal';
import type { Agent } from '../domain/agents/actors';
import { credentialStillAnswers, refusal } from '../domain/agents/authentication';
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
// A wait (`endIfUnanswered` false) runs on to its deadline when the question cannot be answered
// (the database away a moment): it holds nothing meanwhile, and the next request is authenticated.
export function endWhenRevoked(
  { sql, inboxSignal, log }: Deps,
  agent: Agent,
  request: Request,
  end: () => void,
  accessTokenResource?: string,
  endIfUnanswered = true,
) {
  return () => {
    if (inboxSignal.stopped()) return end();
    credentialStillAnswers(sql, agent, request.headers.get('authorization'), accessTokenResource).then(
      (answers) => answers || end(),
      (error: Error) => {
        log.warn('stream_credential_check_failed', { error: error.message });
        if (endIfUnanswered) end();
      },
    );
  };
}

// What a wait held open for an agent does when the credential it was made with may have stopped
// answering (its key revoked or expired, its agent archived, on whichever instance): `signal`
// aborts as soon as it has (or when the client leaves), and `revoked()` says which. An agent key's
// expiry is watched for; an OAuth access token's is not (the client's next call is refused).
// Stopping wakes the wait itself, which answers with what it finds: that is no revocation.
function untilRevoked(deps: Deps, agent: Agent, request: Request, accessTokenResource?: string) {
  const stop = new AbortController();
  let revoked = false;
  const leave = () => stop.abort();
  request.signal.addEventListener('abort', leave);
  const check = endWhenRevoked(deps, agent, request, () => {
    revoked = true;
    stop.abort();
  }, accessTokenResource, false);
  const askAgain = () => deps.inboxSignal.stopped() || check();
  const unwatch = deps.inboxSignal.watchAgent(agent.id, askAgain);
  const cancelExpiry = askAgainAtExpiry(agent.key?.expiresAt ?? null, askAgain);
  return {
    signal: stop.signal,
    revoked: () => revoked,
    release() {
      cancelExpiry();
      unwatch?.();
      request.signal.removeEventListener('abort', leave);
    },
  };
}

// A wait of the HTTP API (the inbox's `wait`, receipts' `waitFor`) ends at once when its credential
// stops answering, and answers 401 as authentication would now. A request that does not wait
// (`waits` false) watches nothing.
export async function whileCredentialAnswers<T>(deps: Deps, agent: Agent, request: Request, waits: boolean, work: (abort: AbortSignal) => Promise<T>): Promise<T> {
  if (!waits) return work(request.signal);
  const held = untilRevoked(deps, agent, request);
  try {
    const answer = await work(held.signal);
    if (held.revoked()) throw refusal(agent);
    return answer;
  } finally {
    held.release();
  }
}

// An MCP call, which may hold a wait (check_inbox's, message_status's): the wait ends at once when
// the credential stops answering, and answers with what it found, as when it runs out; the next
// call is refused. A call that does not wait finishes as it would have.
export async function untilCredentialRevoked<T>(deps: Deps, agent: Agent, request: Request, accessTokenResource: string | undefined, work: (abort: AbortSignal) => Promise<T>) {
  const held = untilRevoked(deps, agent, request, accessTokenResource);
  try {
    return await work(held.signal);
  } finally {
    held.release();
  }
}
