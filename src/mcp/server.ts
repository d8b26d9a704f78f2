import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  ListResourceTemplatesRequestSchema,
  type CallToolResult,
  type ResourceLink,
} from '@modelcontextprotocol/sdk/types.js';
import { failureOf, type FailureAnswer } from '../web/failure';
import { isGovernanceCode } from '../web/envelope';
import { requestIdOf } from '../web/request-id';
import type { Logger } from '../log';
import { protocolError } from './protocol-error';
import { byteQueuing, queuedBytes } from '../web/event-stream';
import { fileTemplates, inboxResource, INBOX_URI, readResource, resourceList } from './resources';
import { toolList, tools, type ToolContext } from './tools';

const INSTRUCTIONS =
  'Agents exchange messages in threads. Loop: check_inbox with wait, read_message, act, acknowledge.';

// A success carries its result twice, as MCP asks: structured, and as that JSON in a text block
// for hosts that read only text.
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

const jsonRpcError = (status: number, id: unknown, code: number, message: string) =>
  Response.json({ jsonrpc: '2.0', id: id ?? null, error: { code, message } }, { status });

// What the SDK would refuse with a schema library's dump: a tools/call whose params are not a
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

// One server for one request: the tools, and the inbox as a resource. A subscription is not kept
// (there is no session to keep it in): every GET stream of the agent hears its inbox's updates.
function mcpServer(ctx: ToolContext, log: Logger, request: Request) {
  const server = new Server(
    { name: 'agent-messaging-service', title: 'Agent Messaging Service', version: '1.0.0' },
    { capabilities: { tools: {}, resources: { subscribe: true } }, instructions: INSTRUCTIONS },
  );
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: toolList }));
  server.setRequestHandler(CallToolRequestSchema, (call) => callTool(ctx, log, request, call.params.name, call.params.arguments));
  server.setRequestHandler(ListResourcesRequestSchema, () => ({ resources: resourceList }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({ resourceTemplates: fileTemplates }));
  server.setRequestHandler(ReadResourceRequestSchema, (read) => readResource(ctx, read.params.uri));
  server.setRequestHandler(SubscribeRequestSchema, (subscribe) => (inboxResource(subscribe.params.uri), {}));
  server.setRequestHandler(UnsubscribeRequestSchema, (unsubscribe) => (inboxResource(unsubscribe.params.uri), {}));
  return server;
}

// Stateless Streamable HTTP: a fresh server and transport per request, so that any instance can
// answer any request and nothing is kept between them. The low-level Server takes tool schemas as
// plain JSON Schema, which lets the tools use the domain's TypeBox schemas unchanged.
// JSON responses (not SSE) because every answer is a single reply, the inbox wait included.
export async function answerMcp(request: Request, rawBody: string, ctx: ToolContext, log: Logger): Promise<Response> {
  let message: unknown;
  try {
    message = JSON.parse(rawBody);
  } catch {
    return jsonRpcError(400, null, ErrorCode.ParseError, 'Parse error: the request body is not valid JSON.');
  }
  const bad = badToolCall(message);
  if (bad) return jsonRpcError(200, (message as { id?: unknown }).id, ErrorCode.InvalidParams, `Invalid params: ${bad}`);
  const server = mcpServer(ctx, log, request);
  const transport = new WebStandardStreamableHTTPServerTransport({ enableJsonResponse: true });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request, { parsedBody: message });
  } finally {
    await server.close();
  }
}

// Bytes of the GET stream a client may leave unread before it is cut. Its updates are small (an
// inbox changed, a keep-alive) and each says only "read again", so this is thousands of them; cut,
// the client opens the stream again and reads its inbox.
export const MCP_STREAM_BACKLOG_BYTES = 256 * 1024;

// The GET stream (server-sent events) a client opens to hear the server speak first: here, that
// the inbox resource changed. `watch` calls its argument whenever mail is accepted for the agent
// and answers how to stop watching (null when the process is stopping). The stream ends when the
// client goes (however it goes), when it leaves more than `backlogBytes` unread, or when `end` is
// called; either way everything is released once.
export async function streamMcp(
  request: Request,
  ctx: ToolContext,
  log: Logger,
  { heartbeatMs, backlogBytes }: { heartbeatMs: number; backlogBytes: number },
  watch: (changed: () => void, end: () => void) => (() => void) | null,
): Promise<Response> {
  const server = mcpServer(ctx, log, request);
  const transport = new WebStandardStreamableHTTPServerTransport({ keepAliveMs: heartbeatMs });
  await server.connect(transport);
  const response = await transport.handleRequest(request);
  if (response.status !== 200 || !response.body) {
    await server.close();
    return response;
  }
  const reader = response.body.getReader();
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    unwatch?.();
    void reader.cancel().catch(() => {});
    void server.close();
  };
  const unwatch = watch(() => void server.sendResourceUpdated({ uri: INBOX_URI }).catch(close), close);
  server.onclose = close;
  request.signal.addEventListener('abort', close, { once: true });
  if (!unwatch || request.signal.aborted) close();
  // A comment at once, so that the answer's head goes out before the first update (a streamed
  // body's head waits for its first bytes). Then what the transport writes is taken as it comes
  // and queued here, where its size is known: the transport's own queue takes whatever it is
  // given, and a client that stopped reading would have every later update held for it.
  const body = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        controller.enqueue(new TextEncoder().encode(': open\n\n'));
        void (async () => {
          try {
            for (;;) {
              const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true as const }));
              if (done || closed) break;
              const queued = queuedBytes(controller);
              // Errored, or taken down by the server under this loop: nobody to send to.
              if (queued === null) break;
              if (queued > backlogBytes) {
                log.warn('mcp_stream_dropped', { reason: 'the client stopped reading', backlogBytes });
                break;
              }
              controller.enqueue(value);
            }
          } catch {
            // The body was torn down between the read and the enqueue: this stream only is over.
          } finally {
            close();
            try {
              controller.close();
            } catch {}
          }
        })();
      },
      cancel: close,
    },
    byteQueuing(),
  );
  return new Response(body, { status: response.status, headers: response.headers });
}
