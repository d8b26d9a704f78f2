import type { Sql } from '../db/connect';
import { fileBytes } from '../domain/files/files';
import type { FileRecord } from '../domain/shared/schemas';

// How every door that serves a file's bytes over HTTP serves them (the agent API, the dashboard's
// previews): as a download that nothing runs. The browser is told to save it rather than show it,
// never to guess its type, and, should it show it anyway, to run no script and load nothing, in a
// sandbox with an origin of its own. Served in chunks as the client reads them; a single byte range
// is honoured (206), one past the end is 416.
const FILE_CSP = "default-src 'none'; sandbox";

// An ASCII name for old clients (anything else, and quotes, replaced) beside the exact UTF-8 one
// (RFC 6266, RFC 8187).
function contentDisposition(name: string, disposition: 'attachment' | 'inline' = 'attachment'): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  return `${disposition}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`;
}

type Range = { start: number; end: number } | 'unsatisfiable' | null;

// One `bytes=` range of a file `size` long, or null to send the whole file (no header, several
// ranges, or one that does not parse: RFC 9110 lets a server ignore those).
function byteRange(header: string | null, size: number): Range {
  const match = header?.match(/^bytes=(\d*)-(\d*)$/);
  if (!match || (match[1] === '' && match[2] === '')) return null;
  if (match[1] === '') {
    const suffix = Number(match[2]);
    if (suffix === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size };
  }
  const start = Number(match[1]);
  const last = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1);
  if (start >= size) return 'unsatisfiable';
  if (last < start) return null;
  return { start, end: last + 1 };
}

export function fileResponse(sql: Sql, file: FileRecord, request: Request, disposition: 'attachment' | 'inline' = 'attachment'): Response {
  const range = byteRange(request.headers.get('range'), file.size);
  if (range === 'unsatisfiable') return new Response(null, { status: 416, headers: { 'content-range': `bytes */${file.size}` } });
  const headers = new Headers({
    'content-type': file.contentType,
    'content-disposition': contentDisposition(file.name, disposition),
    'x-content-type-options': 'nosniff',
    'content-security-policy': FILE_CSP,
    'cross-origin-resource-policy': 'same-origin',
    'cache-control': 'private, no-cache',
    etag: `"${file.sha256}"`,
    'accept-ranges': 'bytes',
  });
  const { start, end } = range ?? { start: 0, end: file.size };
  headers.set('content-length', String(end - start));
  if (range) headers.set('content-range', `bytes ${start}-${end - 1}/${file.size}`);
  if (request.method === 'HEAD') return new Response(null, { status: range ? 206 : 200, headers });
  const bytes = fileBytes(sql, file.id, start, end);
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await bytes.next();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      } catch (error) {
        controller.error(error);
      }
    },
    // The client left: no more chunks are read.
    async cancel() {
      await bytes.return(undefined);
    },
  });
  return new Response(body, { status: range ? 206 : 200, headers });
}
