import { createHash } from 'node:crypto';
import type { PendingQuery, Row } from 'postgres';
import type { Queries, Sql } from '../../db/connect';
import type { Agent } from '../agents/actors';
import { ClientLeft, invalid, notFound, tooLarge } from '../shared/errors';
import { isId } from '../shared/ids';
import type { FileRecord } from '../shared/schemas';
import { agentSeesThread } from '../threads/visibility';
import { checkedName, checkSignature, declaredType } from './file-checks';
import { fileRulesFor } from './file-rules';
import { CHUNK_BYTES, postgresFileStore, type FileStore } from './file-store';

// Files agents hand each other by reference: uploaded once (streamed, chunk by chunk, into the
// store), attached by id to messages, read by whoever sees them.
//
// Who sees a file: its uploader while no message carries it; once one does, exactly the agents who
// see a thread with a message carrying it (threads/visibility.ts), the uploader among them only as
// a participant. To anyone else it does not exist: the same 404 as for a message.
export const NO_SUCH_FILE = 'No such file, or you cannot see it: a file is seen by its uploader until a message carries it, then by the participants of the threads its messages are in.';
export const fileNotFound = () => notFound(NO_SUCH_FILE);

// The rule in SQL, over a file `f`.
export const agentSeesFile = (sql: Queries, agentId: string) => sql`
  f.state = 'ready' and (
    (f.attached_at is null and f.uploader_id = ${agentId})
    or exists (select 1 from message_files vmf where vmf.file_id = f.id and ${agentSeesThread(sql, sql`vmf.thread_id`, agentId)}))`;

const store = (sql: Queries): FileStore => postgresFileStore(sql);

type FileRow = { id: string; name: string; contentType: string; size: string | number; sha256: Buffer };
const record = (r: FileRow): FileRecord => ({ id: r.id, name: r.name, contentType: r.contentType, size: Number(r.size), sha256: r.sha256.toString('hex') });
const columns = (sql: Queries) => sql`f.id, f.name, f.content_type as "contentType", f.size, f.sha256`;

export type Upload = {
  name: unknown;
  // The Content-Type header as sent.
  contentType: string | null;
  // The Content-Length header, when one was sent: the body must be exactly that long.
  declaredLength: number | null;
  body: AsyncIterable<Uint8Array> | Iterable<Uint8Array> | null;
  // Aborted when the client leaves.
  signal?: AbortSignal;
};

const usedSentence = (used: number, quota: number) =>
  `Your files would take more than your storage quota of ${quota} bytes (${used} are in use): nothing was stored. Files are freed when the messages carrying them are deleted, or after a while when no message carries them; or ask a person to raise FILE_QUOTA_BYTES.`;
const overMax = (max: number) => `The file is larger than the limit of ${max} bytes (FILE_MAX_BYTES); nothing was stored.`;
const EMPTY = 'The file is empty (0 bytes); send its bytes as the request body. Nothing was stored.';

// Streams an upload into the store. Nothing of it is seen, counted or kept until its last byte is
// in and checked: the record is written `pending` with the first chunk, each chunk follows in its
// own statement, and one statement charges the uploader's quota and makes it `ready`. Any failure
// on the way (too large, wrong length, a type the bytes belie, the client leaving) deletes what was
// written; a process that dies meanwhile leaves a pending record the sweep removes.
export async function uploadFile(sql: Sql, agent: Agent, upload: Upload): Promise<FileRecord> {
  const name = checkedName(upload.name);
  const type = declaredType(upload.contentType);
  const { maxBytes, quotaBytes } = fileRulesFor(sql);
  if (upload.declaredLength === 0) throw invalid(EMPTY);
  if (upload.declaredLength !== null && upload.declaredLength > maxBytes) throw tooLarge(overMax(maxBytes));
  const [usage] = await sql<{ bytes: string }[]>`select bytes from file_usage where agent_id = ${agent.id}`;
  const used = Number(usage?.bytes ?? 0);
  const overQuota = (bytes: number) => quotaBytes > 0 && used + bytes > quotaBytes;
  if (overQuota(upload.declaredLength ?? 0)) throw tooLarge(usedSentence(used, quotaBytes));

  const files = store(sql);
  const hash = createHash('sha256');
  const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  let filled = 0;
  let total = 0;
  let chunks = 0;
  let fileId: string | null = null;
  const flush = async () => {
    if (filled === 0) return;
    if (fileId === null) {
      checkSignature(type, chunk.subarray(0, filled));
      const [pending] = await sql<{ id: string }[]>`
        insert into files (uploader_id, name, content_type) values (${agent.id}, ${name}, ${type}) returning id`;
      fileId = pending!.id;
    }
    await files.writeChunk(fileId!, chunks++, chunk.subarray(0, filled));
    filled = 0;
  };
  try {
    for await (const piece of upload.body ?? []) {
      if (upload.signal?.aborted) throw new ClientLeft();
      total += piece.byteLength;
      if (total > maxBytes) throw tooLarge(overMax(maxBytes));
      if (overQuota(total)) throw tooLarge(usedSentence(used, quotaBytes));
      hash.update(piece);
      for (let at = 0; at < piece.byteLength; ) {
        const taken = Math.min(CHUNK_BYTES - filled, piece.byteLength - at);
        chunk.set(piece.subarray(at, at + taken), filled);
        filled += taken;
        at += taken;
        if (filled === CHUNK_BYTES) await flush();
      }
    }
    if (upload.signal?.aborted) throw new ClientLeft();
    if (total === 0) throw invalid(EMPTY);
    if (upload.declaredLength !== null && total !== upload.declaredLength) {
      throw invalid(`The body was ${total} bytes but Content-Length said ${upload.declaredLength}: the upload was cut short or mislabelled, and nothing was stored.`);
    }
    await flush();
    // The quota is charged under the usage row's lock, in the statement that makes the file ready,
    // so that concurrent uploads cannot pass it together.
    const [ready] = await sql<FileRow[]>`
      with charged as (
        insert into file_usage as u (agent_id, bytes)
        select ${agent.id}, ${total} where ${quotaBytes}::bigint = 0 or ${total}::bigint <= ${quotaBytes}
        on conflict (agent_id) do update set bytes = u.bytes + excluded.bytes
          where ${quotaBytes}::bigint = 0 or u.bytes + excluded.bytes <= ${quotaBytes}
        returning 1
      )
      update files f set state = 'ready', size = ${total}, sha256 = ${hash.digest()}
      where f.id = ${fileId} and exists (select 1 from charged)
      returning ${columns(sql)}`;
    if (!ready) {
      const [now] = await sql<{ bytes: string }[]>`select bytes from file_usage where agent_id = ${agent.id}`;
      throw tooLarge(usedSentence(Number(now?.bytes ?? 0), quotaBytes));
    }
    return record(ready);
  } catch (error) {
    if (fileId !== null) await sql`delete from files where id = ${fileId} and state = 'pending'`.catch(() => undefined);
    throw error;
  }
}

// A file's record, for an agent that sees it.
export async function fileInfo(sql: Sql, agent: Agent, fileId: string): Promise<FileRecord> {
  if (!isId(fileId)) throw fileNotFound();
  const [row] = await sql<FileRow[]>`select ${columns(sql)} from files f where f.id = ${fileId} and ${agentSeesFile(sql, agent.id)}`;
  if (!row) throw fileNotFound();
  return record(row);
}

// A file as people see it on the dashboard: any a message carries, as they see every thread.
export async function fileForPeople(sql: Sql, fileId: string): Promise<FileRecord> {
  if (!isId(fileId)) throw notFound('No such file.');
  const [row] = await sql<FileRow[]>`
    select ${columns(sql)} from files f where f.id = ${fileId} and f.state = 'ready' and exists (select 1 from message_files mf where mf.file_id = f.id)`;
  if (!row) throw notFound('No such file.');
  return record(row);
}

// The bytes from `start` up to `end` (exclusive) of a file the caller has been shown, read one
// chunk at a time as the consumer asks for more. A file deleted meanwhile ends the read with an
// error rather than with fewer bytes.
export async function* fileBytes(sql: Sql, fileId: string, start: number, end: number): AsyncGenerator<Uint8Array> {
  const files = store(sql);
  for (let at = start; at < end; ) {
    const n = Math.floor(at / CHUNK_BYTES);
    const offset = at - n * CHUNK_BYTES;
    const length = Math.min(CHUNK_BYTES - offset, end - at);
    const bytes = await files.readChunk(fileId, n, offset, length);
    if (!bytes || bytes.byteLength !== length) throw new Error(`File ${fileId} was deleted while it was being read.`);
    yield bytes;
    at += length;
  }
}

// The first `limit` bytes of a file, whole in memory: for doors that hand small files inline.
export async function smallFileBytes(sql: Sql, file: FileRecord, limit: number): Promise<Buffer | null> {
  if (file.size > limit) return null;
  const parts: Uint8Array[] = [];
  for await (const part of fileBytes(sql, file.id, 0, file.size)) parts.push(part);
  return Buffer.concat(parts);
}

// The bytes of each of `fileIds` that `agent` sees and that is at most `limit` bytes, by id: a
// door hands such small files over inline. One statement reads them all; `limit` is at most a
// chunk, so each is its first chunk, and what it holds is at most fileIds.length × limit bytes.
export async function smallFilesBytes(sql: Sql, agent: Agent, fileIds: string[], limit: number): Promise<Map<string, Buffer>> {
  const ids = fileIds.filter(isId);
  if (ids.length === 0) return new Map();
  const seen = sql`
    select f.id from files f
    where f.id = any(${ids}::uuid[]) and f.size <= ${Math.min(limit, CHUNK_BYTES)} and ${agentSeesFile(sql, agent.id)}`;
  const rows = await store(sql).firstChunks(seen);
  return new Map(rows.map((r) => [r.id, r.data]));
}

// The files a post names, checked and locked for the post's transaction: each one the sender sees,
// named once, at most FILES_PER_MESSAGE. The lock (key share) keeps the sweep from deleting one
// before the post commits; one the sweep took first is not found.
export async function lockForAttaching(tx: Queries, rulesOf: Sql, agentId: string, fileIds: string[]): Promise<void> {
  if (fileIds.length === 0) return;
  const { perMessage } = fileRulesFor(rulesOf);
  if (fileIds.length > perMessage) throw invalid(`files must have at most ${perMessage} items (FILES_PER_MESSAGE)`, 'files');
  if (new Set(fileIds).size !== fileIds.length) throw invalid('files names a file twice; name each once', 'files');
  const missing = fileIds.find((id) => !isId(id));
  if (missing !== undefined) throw notFound(`${NO_SUCH_FILE} (${missing})`);
  const rows = await tx<{ id: string }[]>`
    select f.id from files f where f.id = any(${fileIds}::uuid[]) and ${agentSeesFile(tx, agentId)}
    for key share of f`;
  const found = new Set(rows.map((r) => r.id));
  const absent = fileIds.find((id) => !found.has(id));
  if (absent !== undefined) throw notFound(`${NO_SUCH_FILE} (${absent})`);
}

// What a request's files are, for its idempotency fingerprint: each one's SHA-256 where it is a
// file, so that a retry whose bytes were uploaded again (A2A's raw parts) is the same request.
export async function filesFingerprint(sql: Sql, fileIds: string[]): Promise<string[]> {
  const ids = fileIds.filter(isId);
  const rows = ids.length === 0 ? [] : await sql<{ id: string; sha: string }[]>`select id, encode(sha256, 'hex') as sha from files where id = any(${ids}::uuid[])`;
  const hashes = new Map(rows.map((r) => [r.id, r.sha]));
  return fileIds.map((id) => hashes.get(id) ?? id);
}

// The files each message carries, as a JSON array in order, for a statement that reads messages.
export const filesOf = (sql: Queries, messageId: PendingQuery<Row[]>) => sql`
  coalesce((select json_agg(json_build_object('id', f.id, 'name', f.name, 'contentType', f.content_type, 'size', f.size,
                                              'sha256', encode(f.sha256, 'hex')) order by mf.position)
            from message_files mf join files f on f.id = mf.file_id where mf.message_id = ${messageId}), '[]')`;

// The files a message carries, attached in the post's own statement (messages.ts insertPosts) as
// two of its CTEs, the first attachment marked on each file. `carrying` selects message_id,
// thread_id and file_ids (the ids joined by commas, '' for none) of each message written.
export const attachFiles = (sql: Queries, carrying: PendingQuery<Row[]>) => sql`
  carried as (
    insert into message_files (message_id, file_id, thread_id, position)
    select c.message_id, a.id, c.thread_id, a.n - 1
    from (${carrying}) c cross join lateral unnest(string_to_array(c.file_ids, ',')::uuid[]) with ordinality as a(id, n)
    returning file_id
  ), first_carried as (
    update files set attached_at = now() where id in (select file_id from carried) and attached_at is null
  )`;

const SWEEP_BATCH = 20;

// The hourly sweep (sweeps.ts): files no message carries any more (their last one was deleted by
// retention), and uploads no message took within FILE_UNATTACHED_HOURS (a pending one among them:
// its process died), unless a held message waits to carry it. Twenty at a time, each batch its own
// statement; a file a post is attaching right now is skipped (the post holds its lock).
export async function sweepFiles(sql: Sql, unattachedHours: number): Promise<number> {
  let removed = 0;
  for (;;) {
    const rows = await sql<{ id: string }[]>`
      delete from files where id in (
        select f.id from files f
        where (f.attached_at is null and f.created_at < now() - ${unattachedHours} * interval '1 hour'
               and not exists (select 1 from held_messages h where h.state = 'held' and f.id = any(h.file_ids)))
           or (f.attached_at is not null and not exists (select 1 from message_files mf where mf.file_id = f.id))
        limit ${SWEEP_BATCH} for update skip locked)
      returning id`;
    removed += rows.length;
    if (rows.length < SWEEP_BATCH) return removed;
  }
}
