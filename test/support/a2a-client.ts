import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import { afterAll, beforeAll } from 'bun:test';
import type { Harness, TestAgent } from './harness';

// The official A2A SDK's client as an agent of ours, over real HTTP: its key on every request, the
// card resolved from the agent's address below `base` (the trailing slash makes the card's
// `.well-known/agent-card.json` resolve below it).
export const a2aClient = (base: string, caller: TestAgent, to: string): Promise<Client> => a2aClientAt(`${base}/a2a/agents/${to}/`, caller);

// The same, created from an address as the SDK's users give it: the card is looked for relative to it.
export async function a2aClientAt(address: string, caller: TestAgent): Promise<Client> {
  const fetchImpl = ((input: string | URL | Request, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${caller.key}`);
    return fetch(input, { ...init, headers });
  }) as typeof fetch;
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  return factory.createFromUrl(address);
}

// The harness's app listening on a real port for the file's tests (the SDK's client speaks HTTP),
// and the base address, once listening.
export function listening(h: Harness): { base: () => string } {
  let base = '';
  beforeAll(() => {
    h.app.listen({ port: 0, hostname: '127.0.0.1' });
    base = `http://127.0.0.1:${h.app.server!.port}`;
  });
  afterAll(() => h.app.stop(true));
  return { base: () => base };
}
