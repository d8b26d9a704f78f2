import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

// 256-bit random credentials. Agent keys are stored only as their SHA-256; signing secrets must
// stay readable (the contract shows them on the dashboard), so they are stored as minted.
export const AGENT_KEY_PATTERN = /^agt_[A-Za-z0-9_-]{43}$/;

export const newAgentKey = () => `agt_${randomBytes(32).toString('base64url')}`;
// The Standard Webhooks form (standard base64, not base64url), which their libraries decode into
// the key of the webhook-signature header; docs/reference/webhooks.md tells what older secrets do.
export const newSigningSecret = () => `whsec_${randomBytes(32).toString('base64')}`;
export const hashKey = (key: string) => createHash('sha256').update(key).digest();
// What lists and logs name a key by: agt_ and the next 8 characters, 48 of its 256 bits, enough to
// tell an agent's keys apart and far too few to guess the rest from.
export const keyPrefix = (key: string) => key.slice(0, 12);

// Whether a presented secret (a bearer token, a signature) is the expected one, compared in
// constant time so that a wrong guess learns nothing from how long the answer takes.
export function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
