// An agent without a webhook, over MCP. Instead of polling in a tight loop it asks check_inbox to
// wait: the call returns as soon as a message arrives for the agent, or with [] after `wait` seconds.
//
//   AMS_URL=http://localhost:3000 AGENT_KEY=agt_… bun examples/polling-agent.ts
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

type InboxEntry = { messageId: string; threadId: string; thread: string; sender: string; summary: string };
type Message = { id: string; threadId: string; sender: string; content: string };

const baseUrl = process.env.AMS_URL ?? 'http://localhost:3000';
const key = process.env.AGENT_KEY;
if (!key) throw new Error('Set AGENT_KEY to the agent key (agt_…).');

const WAIT_SECONDS = 30;

const client = new Client({ name: 'polling-agent', version: '1.0.0' });
await client.connect(
  new StreamableHTTPClientTransport(new URL('/mcp', baseUrl), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  }),
);

async function call<T>(name: string, args: Record<string, unknown> = {}): Promise<T> {
  const result = (await client.callTool({ name, arguments: args })) as { content: { text: string }[]; isError?: boolean };
  const text = result.content[0]?.text ?? '';
  if (result.isError) throw new Error(`${name}: ${text}`);
  return JSON.parse(text) as T;
}

// The agent's own work goes here. This one only prints what it received.
async function handle(message: Message, entry: InboxEntry) {
  console.log(`[${entry.thread}] ${message.sender}: ${message.content}`);
}

let running = true;
process.on('SIGINT', () => {
  running = false;
});

while (running) {
  let entries: InboxEntry[];
  try {
    ({ entries } = await call<{ entries: InboxEntry[] }>('check_inbox', { wait: WAIT_SECONDS }));
  } catch (error) {
    // The server restarting, say: pause instead of hammering it, then carry on.
    console.error(String(error));
    await Bun.sleep(5_000);
    continue;
  }
  for (const entry of entries) {
    const message = await call<Message>('read_message', { messageId: entry.messageId });
    await handle(message, entry);
    // Acknowledge only once handled: an agent that crashes mid-way finds the message again.
    await call('acknowledge', { messageId: entry.messageId });
  }
}

await client.close();
