import { createMcpHandler, Server } from '@modelcontextprotocol/server';
import type { Logger } from '../log';
import { CAPABILITIES, INSTRUCTIONS, mcpHandlers, SERVER_INFO } from './answers';
import { relayWatched } from './relay-bounded';
import { INBOX_URI } from './resources';
import type { ToolContext } from './tools';

// MCP 2026-07-28 with the SDK's v2 package: stateless requests, each carrying its protocol version
// in _meta, with no initialize and no session. The same handlers as 2025-11-25 (answers.ts); the
// SDK answers server/discover and subscriptions/listen itself. Requests of 2025-11-25 never reach
// here: routes.ts sends them to server.ts, whose answers (and the GET stream) stay as they were.
function mcpServer(ctx: ToolContext, log: Logger, request: Request) {
  const server = new Server(SERVER_INFO, { capabilities: CAPABILITIES, instructions: INSTRUCTIONS });
  const answer = mcpHandlers(ctx, log, request);
  server.setRequestHandler('tools/list', answer['tools/list']);
  server.setRequestHandler('tools/call', answer['tools/call']);
  server.setRequestHandler('resources/list', answer['resources/list']);
  server.setRequestHandler('resources/templates/list', answer['resources/templates/list']);
  server.setRequestHandler('resources/read', answer['resources/read']);
  return server;
}

// A handler for one request: strict (a request without 2026-07-28's _meta is not its to answer),
// and with its own event bus, which carries this one agent's inbox updates to its one listen
// stream. The SDK's faults and refusals of malformed envelopes are its answers; the log hears them
// at debug, as a client's mistake.
const handlerFor = (ctx: ToolContext, log: Logger, request: Request, keepAliveMs?: number) =>
  createMcpHandler(() => mcpServer(ctx, log, request), {
    legacy: 'reject',
    ...(keepAliveMs !== undefined && { keepAliveMs }),
    onerror: (error) => log.debug('mcp_request_refused', { error: error.message }),
  });

export async function answerMcp2026(request: Request, message: unknown, ctx: ToolContext, log: Logger): Promise<Response> {
  return handlerFor(ctx, log, request).fetch(request, { parsedBody: message });
}

// subscriptions/listen: the stream on which a 2026-07-28 client hears that its inbox changed, in
// place of 2025-11-25's GET stream, and bounded as that one is. `watch` is the GET stream's: it
// calls `changed` whenever mail is accepted for the agent and `end` when the stream must end (the
// key revoked or expired, the process stopping), and answers how to stop watching. Ending is
// graceful: the SDK sends the listen request's result, so the client knows it was let go.
export async function listen2026(
  request: Request,
  message: unknown,
  ctx: ToolContext,
  log: Logger,
  { heartbeatMs, backlogBytes }: { heartbeatMs: number; backlogBytes: number },
  watch: (changed: () => void, end: () => void) => (() => void) | null,
): Promise<Response> {
  const handler = handlerFor(ctx, log, request, heartbeatMs);
  const response = await handler.fetch(request, { parsedBody: message });
  // A refusal (no filter, a malformed envelope) is one JSON answer: nothing to watch for.
  if (!response.body || !response.headers.get('content-type')?.startsWith('text/event-stream')) return response;
  return relayWatched(request, response as Response & { body: ReadableStream<Uint8Array> }, { log, backlogBytes }, () => void handler.close(), () =>
    watch(
      () => handler.notify.resourceUpdated(INBOX_URI),
      () => void handler.close(),
    ),
  );
}
