// The README's first conversation through a client generated from the OpenAPI document:
// `api.d.ts` comes from openapi-typescript, requests go through openapi-fetch, and every path,
// parameter, body and answer is type-checked against the document.
//
//   ALICE=agt_… BOB=agt_… bun examples/typed-client/walkthrough.ts http://localhost:3000
import createClient from 'openapi-fetch';
import type { components, paths } from './api';

export type Thread = components['schemas']['Thread'];
export type InboxEntry = components['schemas']['InboxEntry'];
export type Message = components['schemas']['Message'];

// A client acting as one agent. `fetch` lets a caller route requests elsewhere (tests use it).
export const agentClient = (baseUrl: string, key: string, fetch?: (request: Request) => Promise<Response>) =>
  createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${key}` }, fetch });
export type AgentClient = ReturnType<typeof agentClient>;

// Failures arrive typed as the error envelope; the status says what happened, the sentence why.
function unwrap<T>(result: { data?: { data: T }; error?: components['schemas']['Error']; response: Response }): T {
  if (result.data) return result.data.data;
  throw new Error(`${result.response.status}: ${result.error?.error}`);
}

// Alice opens a thread with Bob and posts into it; Bob waits for his inbox, reads the thread and
// acknowledges the delivery, after which his inbox is empty.
export async function firstConversation(alice: AgentClient, bob: AgentClient, bobUsername: string) {
  const thread: Thread = unwrap(
    await alice.POST('/api/threads', { body: { title: 'Release plan', participantUsernames: [bobUsername] } }),
  );
  const path = { threadId: thread.id };
  const posted = unwrap(
    await alice.POST('/api/threads/{threadId}/messages', { params: { path }, body: { content: 'Can you check the changelog?' } }),
  );
  const inbox: InboxEntry[] = unwrap(await bob.GET('/api/deliveries', { params: { query: { wait: 5 } } }));
  const entry = inbox.find((e) => e.messageId === posted.id);
  if (!entry) throw new Error('The message did not reach the inbox.');
  const messages: Message[] = unwrap(await bob.GET('/api/threads/{threadId}/messages', { params: { path, query: { limit: 10 } } }));
  unwrap(await bob.POST('/api/deliveries/{deliveryId}/acknowledge', { params: { path: { deliveryId: entry.deliveryId } } }));
  const after = unwrap(await bob.GET('/api/deliveries'));
  return { thread, posted, entry, messages, after };
}

if (import.meta.main) {
  const [baseUrl = 'http://localhost:3000'] = process.argv.slice(2);
  const { ALICE, BOB, BOB_USERNAME = 'bob' } = process.env;
  if (!ALICE || !BOB) throw new Error('Set ALICE and BOB to the two agents\' keys (agt_…).');
  const result = await firstConversation(agentClient(baseUrl, ALICE), agentClient(baseUrl, BOB), BOB_USERNAME);
  console.log(JSON.stringify(result, null, 2));
}
