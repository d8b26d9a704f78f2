import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

// The SDK's own client over real HTTP, speaking as the agent whose key it carries (with any other
// headers a host sends).
export async function mcpClient(baseUrl: string, key: string, headers: Record<string, string> = {}) {
  const client = new Client({ name: 'ams-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', baseUrl), {
    requestInit: { headers: { authorization: `Bearer ${key}`, ...headers } },
  });
  await client.connect(transport);
  const call = async (name: string, args: Record<string, unknown> = {}) => {
    const result = (await client.callTool({ name, arguments: args })) as { content: { text: string }[]; isError?: boolean };
    const text = result.content[0]!.text;
    return (result.isError ? { error: text } : { data: JSON.parse(text) }) as { data?: any; error?: string };
  };
  return { client, call, close: () => client.close() };
}
