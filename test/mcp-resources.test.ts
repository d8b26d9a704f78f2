import { expect, test } from 'bun:test';
import { ResourceUpdatedNotificationSchema, type ServerNotification } from '@modelcontextprotocol/sdk/types.js';
import { setArchived } from '../src/domain/agents/agents';
import { uniqueName, useHarness, useListening } from './support/harness';
import { mcpClient } from './support/mcp-client';
import { eventually } from './support/receiver';
import { BY_CLI } from '../src/domain/people/audit';

// The inbox as an MCP resource, through the official SDK client over real HTTP: listed, read,
// subscribed to, and its updates heard on the GET stream the client opens by itself.
const h = useHarness();
const server = useListening(h);

async function agentWithClient() {
  const sender = await h.agent(uniqueName('resource-sender'));
  const reader = await h.agent(uniqueName('resource-reader'));
  const threadId = await h.thread(sender, [reader], 'Resources');
  const mcp = await mcpClient(server.base, reader.key);
  const updates: ServerNotification[] = [];
  mcp.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => void updates.push(notification));
  return { sender, reader, threadId, mcp, updates };
}

test('the inbox is listed and read as a resource: what check_inbox answers, without waiting', async () => {
  const { sender, threadId, mcp } = await agentWithClient();
  expect(mcp.client.getServerCapabilities()).toEqual({ tools: {}, resources: { subscribe: true } });
  const { resources } = await mcp.client.listResources();
  expect(resources).toEqual([
    {
      uri: 'ams://inbox',
      name: 'inbox',
      title: 'Inbox',
      description: 'Your unacknowledged messages, oldest first, without bodies (as check_inbox). Subscribe to be told when mail arrives.',
      mimeType: 'application/json',
    },
  ]);
  const { id } = await h.post(sender, threadId, 'read me as a resource');
  const read = await mcp.client.readResource({ uri: 'ams://inbox' });
  const inbox = await mcp.call('check_inbox');
  expect(read.contents).toEqual([{ uri: 'ams://inbox', mimeType: 'application/json', text: JSON.stringify(inbox.data) }]);
  expect(inbox.data.entries.map((e: { messageId: string }) => e.messageId)).toEqual([id]);
  await expect(mcp.client.readResource({ uri: 'ams://outbox' })).rejects.toThrow(
    'There is no resource ams://outbox; resources/list names the one there is, ams://inbox.',
  );
  await mcp.close();
  await eventually(async () => h.inboxSignal.streaming() === 0, 10_000);
});

test('a subscriber hears notifications/resources/updated on its GET stream when mail arrives, and nothing when it does not', async () => {
  const { sender, reader, threadId, mcp, updates } = await agentWithClient();
  expect(await mcp.client.subscribeResource({ uri: 'ams://inbox' })).toEqual({});
  await expect(mcp.client.subscribeResource({ uri: 'ams://outbox' })).rejects.toThrow('There is no resource ams://outbox');
  // The SDK client opens its GET stream once connected.
  await eventually(async () => h.inboxSignal.streaming() === 1, 10_000);
  await h.post(sender, threadId, 'you have mail');
  await eventually(async () => updates.length === 1, 10_000);
  expect(updates[0]).toEqual({ method: 'notifications/resources/updated', params: { uri: 'ams://inbox' } });
  // The reader's own post is mail for the sender, not for it: no update (given the time a wake-up
  // takes, ten times over).
  await h.post(reader, threadId, 'not mail for me');
  await Bun.sleep(300);
  expect(updates).toHaveLength(1);
  await h.post(sender, threadId, 'more mail');
  await eventually(async () => updates.length === 2, 10_000);
  expect(await mcp.client.unsubscribeResource({ uri: 'ams://inbox' })).toEqual({});
  await mcp.close();
  await eventually(async () => h.inboxSignal.streaming() === 0, 10_000);
});

test('archiving the agent ends its GET stream', async () => {
  const { reader, mcp } = await agentWithClient();
  await eventually(async () => h.inboxSignal.streaming() === 1, 10_000);
  await setArchived(h.db.sql, BY_CLI, reader.username, true);
  await eventually(async () => h.inboxSignal.streaming() === 0, 10_000);
  await mcp.close();
});

test('revoking the key its client called with ends its GET stream; a client with another key of the agent keeps its own', async () => {
  const { reader, mcp } = await agentWithClient();
  const other = await h.call('POST', '/api/agents/me/keys', { key: reader.key, body: { name: 'other client' } });
  const second = await mcpClient(server.base, other.body.data.apiKey);
  await eventually(async () => h.inboxSignal.streaming() === 2, 10_000);
  const [initial] = (await h.call('GET', '/api/agents/me/keys', { key: reader.key })).body.data;
  expect((await h.call('DELETE', `/api/agents/me/keys/${initial.id}`, { key: other.body.data.apiKey })).status).toBe(200);
  await eventually(async () => h.inboxSignal.streaming() === 1, 2_000);
  expect((await second.call('check_inbox')).data).toEqual({ entries: [] });
  await mcp.close();
  await second.close();
  await eventually(async () => h.inboxSignal.streaming() === 0, 10_000);
});

test("a check_inbox wait with a key revoked meanwhile ends at once with what it found; the client's next call is refused", async () => {
  const { reader, mcp } = await agentWithClient();
  const other = (await h.call('POST', '/api/agents/me/keys', { key: reader.key, body: { name: 'spare' } })).body.data;
  const [initial] = (await h.call('GET', '/api/agents/me/keys', { key: reader.key })).body.data;
  const waiting = mcp.call('check_inbox', { wait: 40 }).then((answer) => ({ answer, at: Date.now() }));
  await eventually(async () => h.inboxSignal.waiting() > 0 || null, 5_000);
  const revokedAt = Date.now();
  expect((await h.call('DELETE', `/api/agents/me/keys/${initial.id}`, { key: other.apiKey })).status).toBe(200);
  const { answer, at } = await waiting;
  expect(answer).toEqual({ data: { entries: [] } });
  expect(at - revokedAt).toBeLessThan(2_000);
  await expect(mcp.call('check_inbox')).rejects.toThrow('The API key is not recognised or its agent is archived.');
  await mcp.close().catch(() => {});
  await eventually(async () => h.inboxSignal.streaming() === 0, 10_000);
});
