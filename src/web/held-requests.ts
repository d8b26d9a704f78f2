import type { Presence } from '../domain/agents/presence';
import { rateLimited } from '../domain/shared/errors';

export const tooManyHeld = (most: number) =>
  `This agent already holds ${most} requests open on this server (streams and waiting requests together), the most one agent may: close one before opening another.`;

// The requests each agent holds open on this process: its streams (the event stream, MCP's GET
// stream, A2A's streams) and its waits (the inbox's `wait`, receipts' `waitFor`, MCP's waits, A2A's
// blocking sends), at most `most` at once. Each costs memory and a socket for as long as it is open,
// and a wait a read each time it is woken, so a key could otherwise hold thousands and have every
// post read for each. Counted here, per process, rather than in the database: what a held request
// costs is this process's, and a count in the database would outlive a process that died holding
// them. A place is taken before the request is answered, in the same synchronous step as the check,
// so two requests cannot both take the last. An agent holding something here is online: `presence`
// hears when its first place is taken and its last given back (domain/agents/presence.ts).
export function heldRequests(most: number, presence?: Pick<Presence, 'opened' | 'closed'>) {
  const held = new Map<string, number>();
  const take = (agentId: string): (() => void) => {
    const count = held.get(agentId) ?? 0;
    if (count >= most) throw rateLimited(tooManyHeld(most));
    held.set(agentId, count + 1);
    if (count === 0) presence?.opened(agentId);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const left = held.get(agentId)! - 1;
      if (left === 0) {
        held.delete(agentId);
        presence?.closed(agentId);
      } else held.set(agentId, left);
    };
  };
  return {
    // Takes one of the agent's places, or refuses (429) when it holds `most`. Answers how to give it
    // back; giving it back twice gives back one.
    take,
    // Runs `work` holding a place when it waits (a wait of 0 answers at once and holds nothing).
    async whileWaiting<T>(agentId: string, waits: boolean, work: () => Promise<T>): Promise<T> {
      if (!waits) return work();
      const release = take(agentId);
      try {
        return await work();
      } finally {
        release();
      }
    },
  };
}

export type HeldRequests = ReturnType<typeof heldRequests>;
