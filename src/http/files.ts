import { Elysia, t } from 'elysia';
import type { AgentCache } from '../db/agent-cache';
import type { Sql } from '../db/connect';
import { fileInfo, NO_SUCH_FILE, uploadFile } from '../domain/files/files';
import { FileRecord } from '../domain/shared/schemas';
import { agentAuth } from '../web/agent-auth';
import { ok } from '../web/envelope';
import { fileResponse } from '../web/file-response';
import { documentedAs } from './query';
import { responses } from './responses';

export const FILES_PATH = '/api/files';

const FileParams = t.Object({ fileId: t.String({ description: 'File id' }) });
const noSuchFile = { noSuchFile: NO_SUCH_FILE };

// An operation whose success is the file's bytes names them under BINARY_DOWNLOAD in its detail
// (http/openapi.ts describes it), instead of the JSON envelope.
export const BINARY_DOWNLOAD = 'x-binary-download';

const declaredLength = (request: Request) => {
  const header = request.headers.get('content-length');
  return header === null || !/^\d+$/.test(header) ? null : Number(header);
};

export const fileRoutes = (sql: Sql, agentCache: AgentCache) =>
  new Elysia({ name: 'file-routes', prefix: FILES_PATH, detail: { tags: ['Files'] } })
    .use(agentAuth(sql, agentCache))
    .post(
      '',
      async ({ agent, query, request, set }) => {
        const file = await uploadFile(sql, agent, {
          name: query.name,
          contentType: request.headers.get('content-type'),
          declaredLength: declaredLength(request),
          body: request.body as unknown as AsyncIterable<Uint8Array> | null,
          signal: request.signal,
        });
        set.status = 201;
        return ok(file);
      },
      {
        agentWithStreamedBody: true,
        query: t.Object({
          name: t.Optional(
            documentedAs({ type: 'string', maxLength: 255, description: "The file's name: no / or \\, no control characters, at most 255 characters.", examples: ['report.pdf'] }),
          ),
        }),
        response: responses('upload', 201, FileRecord, {
          400: {
            nameMissing: "name is required: the file's name, such as report.pdf (?name=report.pdf)",
            nameWithFolders: 'name must be a file name without / or \\ (no folders): send report.pdf, not docs/report.pdf',
            empty: 'The file is empty (0 bytes); send its bytes as the request body. Nothing was stored.',
            wrongLength: 'The body was 3 bytes but Content-Length said 4: the upload was cut short or mislabelled, and nothing was stored.',
            typeLies:
              'The bytes are not image/png: its content does not start as a image/png file does. Declare the type the file really has; nothing was stored.',
          },
          413: {
            overMax: 'The file is larger than the limit of 26214400 bytes (FILE_MAX_BYTES); nothing was stored.',
          },
        }),
        detail: {
          operationId: 'uploadFile',
          summary: 'Upload a file',
          description:
            "The request body is the file's bytes, streamed (any length up to `FILE_MAX_BYTES`, 25 MiB by default; with or without Content-Length, which must then be exact). `Content-Type` is the file's type (application/octet-stream when none is sent; a form encoding is refused); a PNG, JPEG, GIF, PDF or ZIP must start as one does. Answers the file's id, size and SHA-256: attach it to a message with `files` on POST /api/threads/{threadId}/messages. Until a message carries it only you see it, and it is deleted after `FILE_UNATTACHED_HOURS` (24) if none does. Your stored files count against `FILE_QUOTA_BYTES` (1 GiB); an upload past it is 413 with a sentence saying how much is used. Nothing of a refused or interrupted upload is kept.",
          requestBody: {
            required: true,
            content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } }, '*/*': { schema: { type: 'string', format: 'binary' } } },
          },
        },
      },
    )
    .get('/:fileId', async ({ agent, params }) => ok(await fileInfo(sql, agent, params.fileId)), {
      agent: true,
      params: FileParams,
      response: responses('get', 200, FileRecord, { 404: noSuchFile }),
      detail: {
        operationId: 'getFile',
        summary: "A file's record",
        description: 'Its name, type, size and SHA-256. A file is seen by its uploader until a message carries it, then by the participants of the threads its messages are in; to anyone else it is 404.',
      },
    })
    .get('/:fileId/content', async ({ agent, params, request }) => fileResponse(sql, await fileInfo(sql, agent, params.fileId), request), {
      agent: true,
      params: FileParams,
      response: responses('get', 200, t.String(), { 404: noSuchFile }),
      detail: {
        operationId: 'downloadFile',
        summary: "Download a file's bytes",
        description:
          "The bytes, streamed, with the declared `Content-Type`, `Content-Disposition: attachment` (the name in ASCII and in UTF-8), `X-Content-Type-Options: nosniff`, `Content-Security-Policy: default-src 'none'; sandbox` and the SHA-256 as `ETag`. One byte range (`Range: bytes=0-1023`) is answered 206; one starting past the end, 416. Who may read it: as GET /api/files/{fileId}.",
        [BINARY_DOWNLOAD]: true,
      },
    });
