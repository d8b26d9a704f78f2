import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { invalid } from './errors';

// Where doorbells may go. A webhook URL is chosen by whoever registers the agent, so without these
// rules the service could be made to call its own network (SSRF). Checked when the URL is saved
// and again, against the freshly resolved addresses, every time it is used.
export type WebhookUrlPolicy = { allowLocal: boolean };

const V4_BLOCKED: [string, number][] = [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16],
  ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16],
  ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
];
const V6_BLOCKED: [string, number][] = [
  ['::', 128], ['::1', 128], ['100::', 64], ['2001::', 32], ['2001:db8::', 32], ['fc00::', 7], ['fe80::', 10],
  ['fec0::', 10], ['ff00::', 8],
];

function v4ToInt(ip: string): number {
  return ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}

function v6ToBigInt(ip: string): bigint {
  let text = ip;
  const v4Tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4Tail) {
    const n = v4ToInt(v4Tail[1]!);
    text = text.slice(0, -v4Tail[1]!.length) + `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const headParts = head ? head.split(':') : [];
  const tailParts = tail ? tail.split(':') : [];
  const missing = 8 - headParts.length - tailParts.length;
  const parts = tail === undefined ? headParts : [...headParts, ...Array(missing).fill('0'), ...tailParts];
  return parts.reduce((n, p) => (n << 16n) + BigInt(parseInt(p || '0', 16)), 0n);
}

const inV4 = (ip: number, [base, bits]: [string, number]) =>
  bits === 0 || ip >>> (32 - bits) === v4ToInt(base) >>> (32 - bits);
const inV6 = (ip: bigint, [base, bits]: [string, number]) =>
  ip >> BigInt(128 - bits) === v6ToBigInt(base) >> BigInt(128 - bits);

export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) {
    const n = v4ToInt(address);
    return !V4_BLOCKED.some((range) => inV4(n, range));
  }
  if (family === 6) {
    const n = v6ToBigInt(address.replace(/%.*$/, ''));
    if (V6_BLOCKED.some((range) => inV6(n, range))) return false;
    // Forms that carry an IPv4 address and reach that host: IPv4-mapped (::ffff:a.b.c.d),
    // IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::).
    const embedded =
      n >> 32n === 0xffffn || n >> 32n === 0n || n >> 32n === v6ToBigInt('64:ff9b::') >> 32n
        ? n & 0xffffffffn
        : n >> 112n === 0x2002n
          ? (n >> 80n) & 0xffffffffn
          : null;
    if (embedded === null) return true;
    const v4 = Number(embedded);
    return isPublicAddress([v4 >>> 24, (v4 >>> 16) & 255, (v4 >>> 8) & 255, v4 & 255].join('.'));
  }
  return false;
}

function parseWebhookUrl(raw: unknown, policy: WebhookUrlPolicy): URL {
  if (typeof raw !== 'string' || raw.length === 0) throw invalid('webhookUrl must be a non-empty string');
  if (raw.length > 2048) throw invalid('webhookUrl must be at most 2048 characters');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid('webhookUrl must be an absolute URL such as https://example.com/hooks/agent');
  }
  const allowed = policy.allowLocal ? ['https:', 'http:'] : ['https:'];
  if (!allowed.includes(url.protocol)) throw invalid('webhookUrl must use https://');
  if (url.username || url.password) throw invalid('webhookUrl must not contain credentials');
  return url;
}

// The addresses a request to this URL may connect to. All of them must be public: a name that
// resolves to one public and one private address is refused rather than raced.
export async function resolveWebhookAddresses(
  raw: unknown,
  policy: WebhookUrlPolicy,
): Promise<{ url: URL; addresses: { address: string; family: number }[] }> {
  const url = parseWebhookUrl(raw, policy);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: { address: string; family: number }[];
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    try {
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch {
      throw invalid(`webhookUrl host ${host} does not resolve`);
    }
  }
  if (addresses.length === 0) throw invalid(`webhookUrl host ${host} does not resolve`);
  if (!policy.allowLocal && addresses.some((a) => !isPublicAddress(a.address))) {
    throw invalid(`webhookUrl must point to a public address; ${host} resolves to a private, loopback or reserved one`);
  }
  return { url, addresses };
}

// Returns the URL exactly as given: notifications go to exactly that URL.
export async function checkWebhookUrl(raw: unknown, policy: WebhookUrlPolicy): Promise<string> {
  await resolveWebhookAddresses(raw as string, policy);
  return raw as string;
}
