import { invalid } from '../shared/errors';
import { codePoints } from '../shared/validate';

const NAME_MAX = 255;

// A file's name is a name, never a path: no separators, no control characters (which would let a
// name rewrite a log line or a header), not `.` or `..`, at most NAME_MAX characters. Refused
// rather than rewritten, so that the name the uploader gave is the name everyone sees.
export function checkedName(raw: unknown): string {
  if (typeof raw !== 'string' || raw.trim() === '') throw invalid('name is required: the file\'s name, such as report.pdf (?name=report.pdf)', 'name');
  const name = raw.trim();
  if (/[/\\]/.test(name)) throw invalid('name must be a file name without / or \\ (no folders): send report.pdf, not docs/report.pdf', 'name');
  // Unicode's control and format characters (NUL, CR, LF, bidirectional overrides) and lone surrogates.
  if (/[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/u.test(name)) throw invalid('name must not contain control characters or line breaks', 'name');
  if (name === '.' || name === '..') throw invalid('name must be a file name, not . or ..', 'name');
  if (codePoints(name) > NAME_MAX) throw invalid(`name must be at most ${NAME_MAX} characters`, 'name');
  return name;
}

const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/;

// The declared type, without parameters; none declared is application/octet-stream. A form's
// encoding is what HTTP clients send when told nothing (curl --data-binary), never a file's type.
export function declaredType(header: string | null): string {
  const type = (header ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === '') return 'application/octet-stream';
  if (type === 'application/x-www-form-urlencoded' || type === 'multipart/form-data') {
    throw invalid(`Content-Type ${type} is a form's encoding, not a file's type: send the file's own type (such as text/csv), or application/octet-stream; nothing was stored.`, 'contentType');
  }
  if (!MEDIA_TYPE.test(type)) throw invalid('Content-Type must be a media type such as text/csv or image/png; nothing was stored.', 'contentType');
  return type;
}

// The types whose first bytes say what they are, cheaply: a file declared as one of these must
// start with its signature. Others are stored as declared; every download is served so that no
// type can run (nosniff, attachment, a CSP that runs nothing).
const SIGNATURES: Record<string, number[][]> = {
  'image/png': [[0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]],
  'image/jpeg': [[0xff, 0xd8, 0xff]],
  'image/gif': [[0x47, 0x49, 0x46, 0x38, 0x37, 0x61], [0x47, 0x49, 0x46, 0x38, 0x39, 0x61]],
  'application/pdf': [[0x25, 0x50, 0x44, 0x46, 0x2d]],
  'application/zip': [[0x50, 0x4b, 0x03, 0x04], [0x50, 0x4b, 0x05, 0x06]],
};

export function checkSignature(type: string, head: Uint8Array): void {
  const signatures = SIGNATURES[type];
  if (!signatures) return;
  if (signatures.some((s) => s.length <= head.length && s.every((byte, i) => head[i] === byte))) return;
  throw invalid(`The bytes are not ${type}: its content does not start as a ${type} file does. Declare the type the file really has; nothing was stored.`, 'contentType');
}

// Types whose bytes are text in UTF-8 that a reader may be handed inline (MCP's resources/read).
export const isTextual = (type: string) =>
  type.startsWith('text/') || ['application/json', 'application/xml', 'application/yaml', 'application/x-yaml', 'application/csv'].includes(type) || type.endsWith('+json') || type.endsWith('+xml');
