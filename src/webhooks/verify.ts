import { signature, standardSignature } from '../domain/deliveries/doorbell-signature';
import { sameSecret } from '../domain/agents/keys';

// A handler's secret, or its secrets while a rotation's grace lasts (the new one and the old one:
// docs/reference/webhooks.md, "Rotating the secret"). Each is compared, so the time taken does not
// tell which one matched.
export type Secrets = string | readonly string[];
const each = (secrets: Secrets) => (typeof secrets === 'string' ? [secrets] : secrets);

// For handlers: true when `header` (the X-Signature-256 value) is the signature of the raw,
// unparsed request body under `secrets` (any one). Compared in constant time, so a forger learns
// nothing from how long a wrong guess takes.
export function verifySignature(rawBody: string | Uint8Array, header: string | null | undefined, secrets: Secrets): boolean {
  if (typeof header !== 'string') return false;
  const given = header.trim();
  return each(secrets).reduce((found, secret) => sameSecret(given, signature(rawBody, secret)) || found, false);
}

export const DEFAULT_TOLERANCE_SECONDS = 5 * 60;

// A fetch `Headers` object or a plain record such as Node's `req.headers`.
export type RequestHeaders = Headers | Record<string, string | string[] | undefined>;
export type StandardVerifyOptions = { toleranceSeconds?: number; now?: Date };

// For handlers: true when `webhook-signature` holds a `v1` signature of `webhook-id`,
// `webhook-timestamp` and the raw, unparsed body under `secret`, and the timestamp is at most
// `toleranceSeconds` away from now in either direction. The tolerance is the replay protection:
// a doorbell captured and sent again later is refused, though its signatures still match.
// The header may list several space-separated signatures, and `secrets` be several; one match is enough.
export function verifyStandardWebhook(
  rawBody: string | Uint8Array,
  headers: RequestHeaders,
  secrets: Secrets,
  { toleranceSeconds = DEFAULT_TOLERANCE_SECONDS, now = new Date() }: StandardVerifyOptions = {},
): boolean {
  const id = headerValue(headers, 'webhook-id');
  const timestamp = headerValue(headers, 'webhook-timestamp');
  const signatures = headerValue(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures || !/^\d{1,15}$/.test(timestamp)) return false;
  if (Math.abs(Math.floor(now.getTime() / 1000) - Number(timestamp)) > toleranceSeconds) return false;
  const expected = each(secrets).map((secret) => standardSignature(id, timestamp, rawBody, secret));
  // Every listed signature is compared with every expected one, so the time taken does not tell which matched.
  return signatures.split(' ').reduce((found, given) => expected.reduce((hit, e) => sameSecret(given, e) || hit, false) || found, false);
}

function headerValue(headers: RequestHeaders, name: string): string | null {
  if (headers instanceof Headers) return headers.get(name);
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
  const value = key === undefined ? undefined : headers[key];
  // A header sent twice arrives as a list in Node; no doorbell does that, so it is not ours.
  return typeof value === 'string' ? value : null;
}
