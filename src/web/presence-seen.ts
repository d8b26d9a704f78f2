import { Elysia } from 'elysia';
import type { Presence } from '../domain/agents/presence';
import { authenticatedAgent } from './agent-auth';

// Every request an agent's credential answered for marks it seen, once answered: the agent was
// already looked up (or found in the cache) for the request, so this costs a map update.
export const presenceSeen = (presence: Presence) =>
  new Elysia({ name: 'presence-seen' }).onAfterResponse({ as: 'global' }, ({ request }) => {
    authenticatedAgent(request)?.then(
      (agent) => presence.seen(agent.id),
      () => {},
    );
  });
