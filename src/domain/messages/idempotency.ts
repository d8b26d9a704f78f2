import { createHash } from 'node:crypto';
import type { Queries, Sql } from '../../db/connect';
import { invalid } from '../shared/errors';

// A request made again with the same Idempotency-Key by the same agent for the same operation,
// within the retention, answers what the first one answered and creates nothing. Keys are the
// agent's own for each operation: two agents, or one agent's two operations, may use the same one.
// `name` is what the door calls the key, for the refusal's sentence (Idempotency-Key by default).
export type Idempotency = { key: string; retentionMs: number; name?: string };

const KEY = /^[\x21-\x7e]{1,255}$/;

// A key is what clients generate: a UUID, a hash, a job name. Printable ASCII without spaces keeps
// it safe to log and to quote back in a sentence.
export function checkIdempotencyKey(raw: unknown, field: string): string | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'string' || !KEY.test(raw)) {
    throw invalid(`${field} must be 1 to 255 printable ASCII characters without spaces`);
  }
  return raw;
}

// Object keys in a fixed order, so that the same request hashes the same however it was written.
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, canonical((value as Record<string, unknown>)[key])]),
  );
}

const fingerprintOf = (operation: string, request: unknown) =>
  createHash('sha256').update(JSON.stringify([operation, canonical(request)])).digest('base64url');

// Runs `create` once per key: it gets the transaction the key is claimed in, so what it writes and
// the stored answer commit together, or neither does (a refusal thrown by `create` frees the key,
// and a repeat runs again). A concurrent repeat waits on the key's row until the first commits and
// then answers what it stored; an expired key is claimed afresh.
export async function once<T>(
  sql: Sql,
  agentId: string,
  idempotency: Idempotency,
  operation: string,
  request: unknown,
  create: (tx: Queries) => Promise<T>,
): Promise<{ data: T; replayed: boolean }> {
  const fingerprint = fingerprintOf(operation, request);
  return sql.begin(async (tx) => {
    const [claimed] = await tx<{ claimed: number }[]>`
      insert into idempotency_keys as k (agent_id, operation, key, fingerprint)
      values (${agentId}, ${operation}, ${idempotency.key}, ${fingerprint})
      on conflict (agent_id, operation, key) do update
        set fingerprint = excluded.fingerprint, status = null, response = null, created_at = now()
        where k.created_at < now() - ${idempotency.retentionMs} * interval '1 millisecond'
      returning 1 as claimed`;
    if (!claimed) {
      const [first] = await tx<{ fingerprint: string; response: T }[]>`
        select fingerprint, response from idempotency_keys
        where agent_id = ${agentId} and operation = ${operation} and key = ${idempotency.key}`;
      if (first!.fingerprint !== fingerprint) {
        throw invalid(
          `${idempotency.name ?? 'Idempotency-Key'} ${idempotency.key} was already used for a different request; use a new key for a new request.`,
        );
      }
      return { data: first!.response, replayed: true };
    }
    const data = await create(tx);
    // The answer's HTTP status is each door's to give; the column `status` stays unwritten, and is
    // kept so that an instance of the previous release still reads these rows during an upgrade.
    await tx`
      update idempotency_keys set response = ${tx.json(data as never)}
      where agent_id = ${agentId} and operation = ${operation} and key = ${idempotency.key}`;
    return { data, replayed: false };
  });
}

// Keys past their retention, deleted by the worker's hourly sweep.
export async function sweepIdempotencyKeys(sql: Sql, retentionMs: number): Promise<{ deleted: number }> {
  const rows = await sql<{ deleted: number }[]>`
    delete from idempotency_keys where created_at < now() - ${retentionMs} * interval '1 millisecond' returning 1 as deleted`;
  return { deleted: rows.length };
}
