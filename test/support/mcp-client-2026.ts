import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

// The SDK's v2 client over real HTTP, speaking MCP 2026-07-28 as the agent whose key it carries:
// it finds the version with server/discover and sends it in every request's _meta.
export async function mcpClient2026(baseUrl: string, key: string, headers: Record<string, string> = {}) {
  const client = new Client({ name: 'ams-test', version: '2.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', baseUrl), {
    requestInit: { headers: { authorization: `Bearer ${key}`, ...headers } },
  });
  await client.connect(transport);
  const call = async (name: string, args: Record<string, unknown> = {}, _meta?: Record<string, unknown>) => {
    const result = (await client.callTool({ name, arguments: args, ...(_meta && { _meta }) })) as {
      content: { text: string }[];
      isError?: boolean;
      _meta?: Record<string, unknown>;
    };
    const text = result.content[0]!.text;
    return (result.isError ? { error: text, meta: result._meta } : { data: JSON.parse(text) }) as { data?: any; error?: string; meta?: Record<string, unknown> };
  };
  return { client, call, close: () => client.close() };
}
