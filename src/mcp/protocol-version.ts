import { DEFAULT_NEGOTIATED_PROTOCOL_VERSION, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';

// The versions /mcp speaks: 2026-07-28 with the SDK's v2 package, 2025-11-25 and those before it
// with v1.
export const VERSION_2026 = '2026-07-28';
const SPOKEN_BY_V1 = new Set(SUPPORTED_PROTOCOL_VERSIONS);
const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion';

// The methods counted by name; anything else a client sends is counted as "other", so that no
// client can make a series per made-up method.
const METHODS = new Set([
  'initialize',
  'notifications/initialized',
  'notifications/cancelled',
  'ping',
  'server/discover',
  'subscriptions/listen',
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
]);

type Message = { method?: unknown; params?: { protocolVersion?: unknown; _meta?: Record<string, unknown> } };

const asMessage = (message: unknown): Message => (message && typeof message === 'object' && !Array.isArray(message) ? (message as Message) : {});

export const methodOf = (message: unknown): string => {
  if (Array.isArray(message)) return 'batch';
  const { method } = asMessage(message);
  return typeof method === 'string' && METHODS.has(method) ? method : 'other';
};

// The version a request is answered in. 2026-07-28: the one its _meta claims (the SDK refuses any
// other). Before it: initialize's is the one asked for when it is spoken, else the newest (what
// the server answers); any later request names it in MCP-Protocol-Version, and one that does not
// is taken as 2025-03-26, as the specification says. A version not spoken is "unsupported".
export function protocolVersionOf(request: Request, message: unknown, per2026: boolean): string {
  const { method, params } = asMessage(message);
  if (per2026) return params?._meta?.[PROTOCOL_VERSION_META_KEY] === VERSION_2026 ? VERSION_2026 : 'unsupported';
  if (method === 'initialize') return SPOKEN_BY_V1.has(String(params?.protocolVersion)) ? String(params?.protocolVersion) : LATEST_PROTOCOL_VERSION;
  const claimed = request.headers.get('mcp-protocol-version') ?? DEFAULT_NEGOTIATED_PROTOCOL_VERSION;
  return SPOKEN_BY_V1.has(claimed) ? claimed : 'unsupported';
}

export const traceparentOf = (message: unknown): unknown => asMessage(message).params?._meta?.traceparent;

export const toolOf = (message: unknown): string | undefined => {
  const { method, params } = asMessage(message);
  const name = (params as { name?: unknown } | undefined)?.name;
  return method === 'tools/call' && typeof name === 'string' ? name.slice(0, 100) : undefined;
};
