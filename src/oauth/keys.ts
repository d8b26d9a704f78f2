import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import type { JWKS } from 'oidc-provider';
import type { Sql } from '../db/connect';

export type AuthorizationServerKeys = { jwks: JWKS; cookieKeys: string[] };

// The signing key and the keys that sign the authorization server's cookies, the same for every
// instance on the database: made by whichever instance starts first, read by the others.
export async function authorizationServerKeys(sql: Sql): Promise<AuthorizationServerKeys> {
  const read = async () => {
    const [row] = await sql<{ jwks: JWKS; cookieKeys: string[] }[]>`
      select jwks, cookie_keys as "cookieKeys" from oauth_keys`;
    return row;
  };
  const existing = await read();
  if (existing) return existing;
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), use: 'sig', alg: 'ES256' };
  await sql`
    insert into oauth_keys (jwks, cookie_keys)
    values (${sql.json({ keys: [jwk] } as never)}, ${[randomBytes(32).toString('base64url')]})
    on conflict (singleton) do nothing`;
  return (await read())!;
}
