import { ErrorCode, type CallToolResult, type ResourceLink } from '@modelcontextprotocol/sdk/types.js';
import { failureOf, type FailureAnswer } from '../web/failure';
import { isGovernanceCode } from '../web/envelope';
import { requestIdOf } from '../web/request-id';
import type { Logger } from '../log';
import { protocolError } from './protocol-error';
import { fileTemplates, inboxResource, readResource, resourceList } from './resources';
import { toolList, tools, type ToolContext } from './tools';

// What both protocol versions answer, whichever SDK speaks them (server.ts for 2025-11-25,
// server-2026.ts for 2026-07-28): the server's name, its capabilities and instructions, and one
// handler per method.

export const SERVER_INFO = { name: 'agent-messaging-service', title: 'Agent Messaging Service', version: '1.0.0' };

export const CAPABILITIES = { tools: {}, resources: { subscribe: true } };

export const INSTRUCTIONS =
  'Agents exchange messages in threads. Loop: check_inbox with wait, read_message, act, acknowledge.';

// A success carries its result twice, as MCP asks: structured, and as that JSON in a text block
// for hosts that read only text; then a link per resource it names (a message's files).
const success = (structured: Record<string, unknown>, links: ResourceLink[] = []): CallToolResult => ({
  content: [{ type: 'text', text: JSON.stringify(structured) }, ...links],
  structuredContent: structured,
});
// A refusal is a tool result, so the model can read it and correct itself: the sentence as text,
// and for programs the status the same refusal gets over HTTP, in _meta, with the machine code and
// the seconds to wait of a refusal people configured. Not as structured content: clients check
// that against the tool's output schema, refusals included.
const refusal = (failure: FailureAnswer): CallToolResult => ({
  content: [{ type: 'text', text: failure.sentence }],
  isError: true,
  _meta: {
    status: failure.status,
    ...(isGovernanceCode(failure.code) && { code: failure.code }),
    ...(typeof failure.retryAfter === 'number' && { retryAfter: failure.retryAfter }),
  },
});

async function callTool(ctx: ToolContext, log: Logger, request: Request, name: string, args: unknown): Promise<CallToolResult> {
  const tool = Object.hasOwn(tools, name) ? tools[name] : undefined;
  if (!tool) throw protocolError(ErrorCode.InvalidParams, `There is no tool named ${name}; tools/list names them all.`);
  try {
    const input = args && typeof args === 'object' ? (args as Record<string, unknown>) : {};
    const result = await tool.run(ctx, input);
    return success(result, tool.links?.(result));
  } catch (error) {
    const failure = failureOf(error, requestIdOf(request));
    if (failure.log && failure.log !== 'fault') log.warn(failure.log, { door: 'mcp', tool: name, error: (error as Error).message });
    if (failure.log === 'fault') log.error('mcp_tool_failed', { tool: name, agent: ctx.agent.username, error: (error as Error).stack ?? String(error) });
    return refusal(failure);
  }
}

type Params = { name?: unknown; arguments?: unknown; uri?: unknown } | undefined;

// The methods this server answers, for one request, in the shape both SDKs take a handler: the
// request in, the result out. resources/subscribe and resources/unsubscribe are 2025-11-25's (a
// 2026-07-28 client names the inbox in subscriptions/listen instead, which its SDK answers).
export function mcpHandlers(ctx: ToolContext, log: Logger, request: Request) {
  return {
    'tools/list': () => ({ tools: toolList }),
    'tools/call': ({ params }: { params?: Params }) => callTool(ctx, log, request, String(params?.name), params?.arguments),
    'resources/list': () => ({ resources: resourceList }),
    'resources/templates/list': () => ({ resourceTemplates: fileTemplates }),
    'resources/read': ({ params }: { params?: Params }) => readResource(ctx, String(params?.uri)),
    'resources/subscribe': ({ params }: { params?: Params }) => (inboxResource(String(params?.uri)), {}),
    'resources/unsubscribe': ({ params }: { params?: Params }) => (inboxResource(String(params?.uri)), {}),
  };
}

export type McpHandlers = ReturnType<typeof mcpHandlers>;

const jsonRpcError = (status: number, id: unknown, code: number, message: string) =>
  Response.json({ jsonrpc: '2.0', id: id ?? null, error: { code, message } }, { status });

// What either SDK would refuse with a schema library's dump: a tools/call whose params are not a
// tool name and an object of arguments. Said here in a sentence, as JSON-RPC's "invalid params".
function badToolCall(message: unknown): string | null {
  if (!message || typeof message !== 'object' || Array.isArray(message)) return null;
  const { method, params } = message as { method?: unknown; params?: unknown };
  if (method !== 'tools/call') return null;
  if (!params || typeof params !== 'object' || Array.isArray(params)) return 'params must be an object with the tool name and its arguments.';
  const { name, arguments: args } = params as { name?: unknown; arguments?: unknown };
  if (typeof name !== 'string') return 'params.name must be the name of a tool, as a string.';
  if (args !== undefined && (args === null || typeof args !== 'object' || Array.isArray(args))) {
    return `params.arguments must be an object of ${name}'s arguments.`;
  }
  return null;
}

// A POST body read as JSON-RPC, or the answer that refuses it before any SDK sees it.
export function parseMcpBody(rawBody: string): { message: unknown } | { answer: Response } {
  let message: unknown;
  try {
    message = JSON.parse(rawBody);
  } catch {
    return { answer: jsonRpcError(400, null, ErrorCode.ParseError, 'Parse error: the request body is not valid JSON.') };
  }
  const bad = badToolCall(message);
  if (bad) return { answer: jsonRpcError(200, (message as { id?: unknown }).id, ErrorCode.InvalidParams, `Invalid params: ${bad}`) };
  return { message };
}
