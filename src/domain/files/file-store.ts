import type { PendingQuery, Row } from 'postgres';
import type { Queries } from '../../db/connect';

// Where a file's bytes are kept, apart from its record (files.ts keeps the record, the quota and
// who sees it, whatever the store). Bytes are written once, in order, in chunks of CHUNK_BYTES (the
// last one shorter), and read back by chunk and offset, so that neither an upload nor a download
// ever holds more than a chunk. PostgreSQL is the one store today; an S3-compatible one would
// write each chunk as a part of a multipart upload and read with ranged GETs, and remove its
// objects when the sweep deletes their records (docs/internals/scaling.md says when it is worth it).
export type FileStore = {
  writeChunk(fileId: string, n: number, data: Uint8Array): Promise<void>;
  // `length` bytes of chunk `n` from `offset`, or null when the file is gone meanwhile.
  readChunk(fileId: string, n: number, offset: number, length: number): Promise<Uint8Array | null>;
  // The first chunk of each file `ids` selects (a statement selecting `id`), read together: whole
  // files, for ones no larger than a chunk.
  firstChunks(ids: PendingQuery<Row[]>): Promise<{ id: string; data: Buffer }[]>;
};

export const CHUNK_BYTES = 256 * 1024;

// The chunks are rows of file_chunks (sql/035), deleted with their file by the foreign key.
export const postgresFileStore = (sql: Queries): FileStore => ({
  async writeChunk(fileId, n, data) {
    await sql`insert into file_chunks (file_id, n, data) values (${fileId}, ${n}, ${Buffer.from(data.buffer, data.byteOffset, data.byteLength)})`;
  },
  async readChunk(fileId, n, offset, length) {
    const [row] = await sql<{ data: Buffer }[]>`
      select substring(data from ${offset + 1} for ${length}) as data from file_chunks where file_id = ${fileId} and n = ${n}`;
    return row ? row.data : null;
  },
  firstChunks(ids) {
    return sql<{ id: string; data: Buffer }[]>`select file_id as id, data from file_chunks where n = 0 and file_id in (${ids})`;
  },
});
