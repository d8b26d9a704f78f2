import { ErrorCode, type ReadResourceResult, type Resource } from '@modelcontextprotocol/sdk/types.js';
import { inbox } from '../domain/deliveries/inbox';
import { LIMITS } from '../domain/shared/schemas';
import { protocolError } from './protocol-error';
import type { ToolContext } from './tools';

// The inbox as an MCP resource, for hosts that subscribe to resources rather than call a tool:
// reading it answers what check_inbox answers without waiting; a subscription is heard on the
// GET stream of /mcp (routes.ts), which carries notifications/resources/updated whenever mail is
// accepted for the agent.
export const INBOX_URI = 'ams://inbox';

export const resourceList: Resource[] = [
  {
    uri: INBOX_URI,
    name: 'inbox',
    title: 'Inbox',
    description: 'Your unacknowledged messages, oldest first, without bodies (as check_inbox). Subscribe to be told when mail arrives.',
    mimeType: 'application/json',
  },
];

export function inboxResource(uri: string): void {
  if (uri !== INBOX_URI) throw protocolError(ErrorCode.InvalidParams, `There is no resource ${uri}; resources/list names the one there is, ${INBOX_URI}.`, { uri });
}

export async function readResource(ctx: ToolContext, uri: string): Promise<ReadResourceResult> {
  inboxResource(uri);
  const entries = await inbox(ctx.sql, ctx.agent, LIMITS.listDefault);
  return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ entries }) }] };
}
