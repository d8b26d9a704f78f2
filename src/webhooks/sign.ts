import { createHmac } from 'node:crypto';

export const SIGNATURE_HEADER = 'X-Signature-256';

// `sha256=` and the hex HMAC-SHA256 of exactly the bytes that are sent.
export function signature(body: string | Uint8Array, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}
