import { rateLimited } from '../domain/shared/errors';

export const tooManyStreams = (most: number) =>
  `This agent already holds ${most} streams open on this server (event streams, MCP GET streams and A2A streams together), the most one agent may: close one before opening another.`;

// The streams each agent holds open on this process (the event stream, MCP's GET stream, A2A's
// streams), at most `most` at once. Each costs memory and a socket for as long as it is open and
// asks nothing of the database, so a key could otherwise hold thousands. Counted here, per process,
// rather than in the database: what a stream costs is this process's, and a count in the database
// would outlive a process that died holding streams. A place is taken before the stream is
// answered, in the same synchronous step as the check, so two requests cannot both take the last.
export function heldStreams(most: number) {
  const held = new Map<string, number>();
  return {
    // Takes one of the agent's places, or refuses (429) when it holds `most`. Answers how to give it
    // back; giving it back twice gives back one.
    take(agentId: string): () => void {
      const count = held.get(agentId) ?? 0;
      if (count >= most) throw rateLimited(tooManyStreams(most));
      held.set(agentId, count + 1);
      let given = false;
      return () => {
        if (given) return;
        given = true;
        const left = held.get(agentId)! - 1;
        if (left === 0) held.delete(agentId);
        else held.set(agentId, left);
      };
    },
  };
}

export type HeldStreams = ReturnType<typeof heldStreams>;
