// An authenticated agent, as every door hands it to the domain; `key` is the agent key it called
// with (none for an OAuth access token), which a held stream or wait asks again when it expires.
export type Agent = { id: string; username: string; key?: { id: string; expiresAt: Date | null } };

// Who is acting: an agent with its key, or a person signed in to the dashboard.
export type Actor = { kind: 'agent'; id: string; username: string } | { kind: 'person'; id: string; username: string };

export const asActor = (agent: Agent): Actor => ({ kind: 'agent', id: agent.id, username: agent.username });
