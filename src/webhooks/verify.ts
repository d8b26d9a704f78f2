import { timingSafeEqual } from 'node:crypto';
import { signature } from './sign';

// For handlers: true when `header` (the X-Signature-256 value) is the signature of the raw,
// unparsed request body under `secret`. Compared in constant time, so a forger learns nothing
// from how long a wrong guess takes.
export function verifySignature(rawBody: string | Uint8Array, header: string | null | undefined, secret: string): boolean {
  if (typeof header !== 'string') return false;
  const expected = Buffer.from(signature(rawBody, secret));
  const given = Buffer.from(header.trim());
  return given.length === expected.length && timingSafeEqual(given, expected);
}
