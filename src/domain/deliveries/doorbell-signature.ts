import { createHmac } from 'node:crypto';
import type { SigningSecrets } from '../agents/signing-secrets';

export const SIGNATURE_HEADER = 'X-Signature-256';
export const USER_AGENT = 'agent-messaging-service-webhooks/1';
const SECRET_PREFIX = 'whsec_';

// `sha256=` and the hex HMAC-SHA256 of exactly the bytes that are sent, keyed with the secret
// string as shown (the contract's scheme).
export function signature(body: string | Uint8Array, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

// The Standard Webhooks key: the bytes that the part after `whsec_` encodes. Secrets are minted
// as standard base64; older ones were base64url, which Node's base64 decoder reads as well, so
// they key with the same 32 random bytes a receiver gets by decoding them as base64url.
export function standardWebhooksKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

// `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`, the Standard Webhooks signature.
// `timestamp` is signed exactly as it appears in the header.
export function standardSignature(id: string, timestamp: string, body: string | Uint8Array, secret: string): string {
  const mac = createHmac('sha256', standardWebhooksKey(secret)).update(`${id}.${timestamp}.`).update(body).digest('base64');
  return `v1,${mac}`;
}

// The secrets that sign an attempt made at `at`: the current one, and the one it replaced while
// that one's grace lasts.
function signingKeys(secrets: SigningSecrets, at: Date): { current: string; previous: string | null } {
  const previous = secrets.previous !== null && secrets.previousUntil !== null && at < secrets.previousUntil ? secrets.previous : null;
  return { current: secrets.current, previous };
}

// Every header of one doorbell attempt but Content-Length. `webhook-id` is the deliveryId, the
// same on every retry and resend so receivers can deduplicate; `webhook-timestamp` is this
// attempt's time, so a receiver can refuse a captured doorbell replayed later. During a rotation's
// grace, `webhook-signature` carries a signature under each secret (the new one first), so that a
// receiver holding either verifies; `X-Signature-256` can carry only one, and carries the old
// secret's until the grace ends, so that a handler not yet given the new secret keeps working and
// one given both rolls over with no gap (docs/internals/decisions.md).
export function doorbellHeaders({ deliveryId, body, secrets, timestamp }: { deliveryId: string; body: string; secrets: SigningSecrets; timestamp: Date }) {
  const seconds = String(Math.floor(timestamp.getTime() / 1000));
  const { current, previous } = signingKeys(secrets, timestamp);
  const standard = [current, ...(previous === null ? [] : [previous])].map((secret) => standardSignature(deliveryId, seconds, body, secret));
  return {
    'Content-Type': 'application/json',
    'User-Agent': USER_AGENT,
    [SIGNATURE_HEADER]: signature(body, previous ?? current),
    'webhook-id': deliveryId,
    'webhook-timestamp': seconds,
    'webhook-signature': standard.join(' '),
  };
}
