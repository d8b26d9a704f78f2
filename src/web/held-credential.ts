import type { Sql } from '../db/connect';
import type { InboxSignal } from '../db/inbox-signal';
import type { Agent } from '../domain/agents/actors';
import { credentialStillAnswers } from '../domain/agents/authentication';
import type { Logger } from '../log';

// What a stream held open for an agent (the event stream, MCP's GET stream, A2A's streams) does
// when the agent changes (ams_agents: archived, another key, another name, an OAuth client
// disconnected): asks whether the credential it was opened with still answers for it, and ends if
// not, or if the question cannot be answered. Stopping wakes every stream: they end with the
// process, with no question to ask.
export function endWhenRevoked(
  { sql, inboxSignal, log }: { sql: Sql; inboxSignal: InboxSignal; log: Logger },
  agent: Agent,
  request: Request,
  end: () => void,
  accessTokenResource?: string,
) {
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

