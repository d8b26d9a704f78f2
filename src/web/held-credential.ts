import type { Sql } from '../db/connect';
import type { InboxSignal } from '../db/inbox-signal';
import type { Agent } from '../domain/agents/actors';
import { credentialStillAnswers } from '../domain/agents/authentication';
import type { Logger } from '../log';

// What a stream held open for an agent (the event stream, MCP's GET stream) does when the agent
// changes (ams_agents: archived, another key, another name): asks whether the credential it was
// opened with still answers for it, and ends if not, or if the question cannot be answered.
// Disconnecting an OAuth client is not such a change, so a stream opened with its token outlives
// it (docs/mcp.md says so). Stopping wakes every stream: they end with the process, with no
// question to ask.
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
