import type { Adapter, AdapterPayload } from 'oidc-provider';
import type { Sql } from '../db/connect';
import { hashKey } from '../domain/agents/keys';

// Where oidc-provider keeps its artifacts: one table (sql/015_oauth.sql), keyed by kind and the
// SHA-256 of the id. A code's or a token's id is the credential a client presents, so neither it
// nor the copy oidc-provider puts in the payload (`jti`) is stored: find() is handed the id and
// puts it back. A session is the exception: it is also looked up by its uid, where only the
// payload can tell its id, and it grants nothing here (every authorization asks a person).
const stored = (model: string, payload: AdapterPayload) => {
  if (model === 'Session') return payload;
  const { jti: _jti, ...rest } = payload;
  return rest;
};

export const UNCONNECTED_CLIENT_TTL = '1 day';

export function artifactStore(sql: Sql) {
  return class ArtifactStore implements Adapter {
    constructor(readonly model: string) {}

    async upsert(id: string, payload: AdapterPayload, expiresIn?: number) {
      // A grant is filed under its own id, so that revoking it removes it with what it issued.
      const grantId = this.model === 'Grant' ? id : (payload.grantId ?? null);
      // Anyone may register a client (MCP hosts do it unannounced), so a registration that no
      // person ever connects expires; connecting it (domain/oauth/oauth-connections.ts) keeps it.
      const expiresAt =
        this.model === 'Client'
          ? sql`case when exists (select 1 from oauth_connections where client_id = ${id}) then null
                     else now() + ${UNCONNECTED_CLIENT_TTL}::interval end`
          : expiresIn
            ? sql`now() + make_interval(secs => ${expiresIn})`
            : null;
      await sql`
        insert into oauth_artifacts (model, id_hash, payload, grant_id, uid_hash, expires_at)
        values (${this.model}, ${hashKey(id)}, ${sql.json(stored(this.model, payload) as never)}, ${grantId},
                ${payload.uid ? hashKey(payload.uid) : null}, ${expiresAt})
        on conflict (model, id_hash) do update
          set payload = excluded.payload, grant_id = excluded.grant_id, uid_hash = excluded.uid_hash,
              expires_at = excluded.expires_at`;
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      const [row] = await sql<{ payload: AdapterPayload }[]>`
        select payload from oauth_artifacts
        where model = ${this.model} and id_hash = ${hashKey(id)} and (expires_at is null or expires_at > now())`;
      return row && { ...row.payload, jti: id };
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      const [row] = await sql<{ payload: AdapterPayload }[]>`
        select payload from oauth_artifacts
        where model = ${this.model} and uid_hash = ${hashKey(uid)} and (expires_at is null or expires_at > now())`;
      return row?.payload;
    }

    // The device flow is not offered.
    async findByUserCode(): Promise<undefined> {
      return undefined;
    }

    async consume(id: string) {
      await sql`
        update oauth_artifacts set payload = payload || jsonb_build_object('consumed', extract(epoch from now())::bigint)
        where model = ${this.model} and id_hash = ${hashKey(id)}`;
    }

    async destroy(id: string) {
      await sql`delete from oauth_artifacts where model = ${this.model} and id_hash = ${hashKey(id)}`;
    }

    // A revoked grant ends its connection too (and the connection's trigger removes what the grant
    // issued); a grant that never became a connection is removed here.
    async revokeByGrantId(grantId: string) {
      await sql`
        with ended as (delete from oauth_connections where grant_id = ${grantId})
        delete from oauth_artifacts where grant_id = ${grantId}`;
    }
  };
}
