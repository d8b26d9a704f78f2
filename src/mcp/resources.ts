import { ErrorCode, type ReadResourceResult, type Resource, type ResourceTemplate } from '@modelcontextprotocol/sdk/types.js';
import { inbox } from '../domain/deliveries/inbox';
import { fileInfo, NO_SUCH_FILE, smallFileBytes } from '../domain/files/files';
import { isTextual } from '../domain/files/file-checks';
import { DomainError } from '../domain/shared/errors';
import { LIMITS, type FileRecord } from '../domain/shared/schemas';
import { protocolError } from './protocol-error';
import { FILE_URI, type ToolContext } from './tools';

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

// Each file a message carries is a resource: read_message links to it, resources/read serves it.
// Small text comes inline as text, other small files as a blob (base64); anything larger is
// named with its HTTP address, so that no model's context is filled with a file's bytes.
const INLINE_TEXT_BYTES = 64 * 1024;
// MCP's "resource not found".
const RESOURCE_NOT_FOUND = -32002;

export const fileTemplates: ResourceTemplate[] = [
  {
    uriTemplate: `${FILE_URI}{fileId}`,
    name: 'file',
    title: 'A file a message carries',
    description: `A file attached to a message you can read (read_message links to each). Text up to ${INLINE_TEXT_BYTES} bytes comes inline, other files up to ${LIMITS.inlineFileBytes} bytes as a blob; larger ones are named with their HTTP address.`,
  },
];

async function readFile(ctx: ToolContext, uri: string): Promise<ReadResourceResult> {
  let file: FileRecord;
  try {
    file = await fileInfo(ctx.sql, ctx.agent, uri.slice(FILE_URI.length));
  } catch (error) {
    if (error instanceof DomainError && error.kind === 'not_found') throw protocolError(RESOURCE_NOT_FOUND, NO_SUCH_FILE);
    throw error;
  }
  const textual = isTextual(file.contentType);
  const bytes = await smallFileBytes(ctx.sql, file, textual ? INLINE_TEXT_BYTES : LIMITS.inlineFileBytes);
  const meta = { name: file.name, size: file.size, sha256: file.sha256 };
  if (bytes && textual) return { contents: [{ uri, mimeType: file.contentType, text: bytes.toString('utf8'), _meta: meta }] };
  if (bytes) return { contents: [{ uri, mimeType: file.contentType, blob: bytes.toString('base64'), _meta: meta }] };
  const address = `${ctx.baseUrl}/api/files/${file.id}/content`;
  return {
    contents: [
      {
        uri,
        mimeType: 'text/plain',
        text: `${file.name} (${file.contentType}, ${file.size} bytes, SHA-256 ${file.sha256}) is too large to hand over here: download it from ${address} with your agent key as a Bearer token.`,
        _meta: { ...meta, contentType: file.contentType, download: address },
      },
    ],
  };
}

export async function readResource(ctx: ToolContext, uri: string): Promise<ReadResourceResult> {
  if (uri.startsWith(FILE_URI)) return readFile(ctx, uri);
  inboxResource(uri);
  const entries = await inbox(ctx.sql, ctx.agent, LIMITS.listDefault);
  return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ entries }) }] };
}
