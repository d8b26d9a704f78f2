import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { DATABASE_UNAVAILABLE, isDatabaseUnavailable } from '../db/unavailable';
import { DomainError } from '../domain/errors';
import { fail, statusOf } from '../http/envelope';
import type { Logger } from '../log';
import { toolList, tools, type ToolContext } from './tools';

const INSTRUCTIONS =
  'Agents exchange messages in threads. Loop: check_inbox with wait, read_message, act, acknowledge.';

const text = (value: string, isError = false): CallToolResult => ({ content: [{ type: 'text', text: value }], isError });
const refusal = (sentence: string, status: number): CallToolResult => ({
  ...text(sentence, true),
  structuredContent: { ...fail(sentence), status },
});

async function callTool(ctx: ToolContext, log: Logger, name: string, args: unknown): Promise<CallToolResult> {
  const tool = Object.hasOwn(tools, name) ? tools[name] : undefined;
  if (!tool) return text(`There is no tool named ${name}.`, true);
  try {
    const input = args && typeof args === 'object' ? (args as Record<string, unknown>) : {};
    return text(JSON.stringify(await tool.run(ctx, input)));
  } catch (error) {
    // The sentence as text, and for programs the envelope with the status the same refusal gets
    // over HTTP, so that clients branch on the status, never on the sentence.
    if (error instanceof DomainError) return refusal(error.message, statusOf[error.kind]);
    if (isDatabaseUnavailable(error)) return refusal(DATABASE_UNAVAILABLE, 503);
    log.error('mcp_tool_failed', { tool: name, agent: ctx.agent.username, error: (error as Error).stack ?? String(error) });
    return text('Internal server error; nothing about the request will fix it.', true);
  }
}

// Stateless Streamable HTTP: a fresh server and transport per request, so that any instance can
// answer any request and nothing is kept between them. The low-level Server takes tool schemas as
// plain JSON Schema, which lets the tools use the domain's TypeBox schemas unchanged.
// JSON responses (not SSE) because every answer is a single reply, the inbox wait included.
export async function answerMcp(request: Request, body: unknown, ctx: ToolContext, log: Logger): Promise<Response> {
  const server = new Server(
    { name: 'agent-messaging-service', version: '1.0.0' },
    { capabilities: { tools: {} }, instructions: INSTRUCTIONS },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: toolList }));
  server.setRequestHandler(CallToolRequestSchema, (call) => callTool(ctx, log, call.params.name, call.params.arguments));
  const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request, { parsedBody: body });
  } finally {
    await server.close();
  }
}
