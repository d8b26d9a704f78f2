import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import {
  CallToolRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  ListResourceTemplatesRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from '../log';
import { CAPABILITIES, INSTRUCTIONS, mcpHandlers, SERVER_INFO } from './answers';
import { relayWatched } from './relay-bounded';
import { INBOX_URI } from './resources';
import type { ToolContext } from './tools';

// One server for one request, speaking 2025-11-25 (and the versions before it) with the SDK's v1
// package: the tools, and the inbox as a resource. A subscription is not kept (there is no
// session to keep it in): every GET stream of the agent hears its inbox's updates.
function mcpServer(ctx: ToolContext, log: Logger, request: Request) {
  const server = new Server(SERVER_INFO, { capabilities: CAPABILITIES, instructions: INSTRUCTIONS });
  const answer = mcpHandlers(ctx, log, request);
  server.setRequestHandler(ListToolsRequestSchema, answer['tools/list']);
  server.setRequestHandler(CallToolRequestSchema, answer['tools/call']);
  server.setRequestHandler(ListResourcesRequestSchema, answer['resources/list']);
  server.setRequestHandler(ListResourceTemplatesRequestSchema, answer['resources/templates/list']);
  server.setRequestHandler(ReadResourceRequestSchema, answer['resources/read']);
  server.setRequestHandler(SubscribeRequestSchema, answer['resources/subscribe']);
  server.setRequestHandler(UnsubscribeRequestSchema, answer['resources/unsubscribe']);
  return server;
}

// Stateless Streamable HTTP: a fresh server and transport per request, so that any instance can
// answer any request and nothing is kept between them. The low-level Server takes tool schemas as
// plain JSON Schema, which lets the tools use the domain's TypeBox schemas unchanged.
// JSON responses (not SSE) because every answer is a single reply, the inbox wait included.
export async function answerMcp(request: Request, message: unknown, ctx: ToolContext, log: Logger): Promise<Response> {
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
  return relayWatched(request, response as Response & { body: ReadableStream<Uint8Array> }, { log, backlogBytes }, () => void server.close(), (close) => {
    server.onclose = close;
    return watch(() => void server.sendResourceUpdated({ uri: INBOX_URI }).catch(close), close);
  });
}
