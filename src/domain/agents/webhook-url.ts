import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { invalid } from '../shared/errors';
import { checkStorableText, codePoints } from '../shared/validate';

// Where doorbells may go. A webhook URL is chosen by whoever registers the agent, so without these
// rules the service could be made to call its own network (SSRF). Checked when the URL is saved
// and again, against the freshly resolved addresses, every time it is used.
export type WebhookUrlPolicy = { allowLocal: boolean };

// IANA allocates global unicast IPv6 from 2000::/3 only; the rest is reserved, and ipaddr.js names
// only part of it (the deprecated IPv4-compatible ::/96, for one, it calls unicast).
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

const v4 = (bytes: number[]) => new ipaddr.IPv4(bytes);

// The IPv4 addresses an IPv6 address reaches when it carries them: IPv4-mapped (::ffff:a.b.c.d),
// IPv4-translated (::ffff:0:a.b.c.d), NAT64 with the well-known prefix (64:ff9b::a.b.c.d), 6to4
// (2002:aabb:ccdd::) and Teredo (its server, and its client stored inverted). Null for any other.
// The local-use NAT64 prefix 64:ff9b:1::/48 is left out: where it carries the IPv4 address depends on
// the length each network chose, so it is refused as a whole, as IANA marks it not globally reachable.
function embeddedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4[] | null {
  const bytes = ip.toByteArray();
  switch (ip.range()) {
    case 'ipv4Mapped':
    case 'rfc6145':
      return [v4(bytes.slice(12))];
    case '6to4':
      return [v4(bytes.slice(2, 6))];
    case 'teredo':
      return [v4(bytes.slice(4, 8)), v4(bytes.slice(12).map((b) => b ^ 0xff))];
    default:
      return ip.match(NAT64_WELL_KNOWN) ? [v4(bytes.slice(12))] : null;
  }
}

// Only global unicast addresses pass: every range ipaddr.js names (loopback, private, link-local,
// reserved, documentation, benchmarking, multicast, anycast services …) is refused. Node's isIP
// comes first because ipaddr.js also reads forms such as 0x7f.1 and 010.0.0.1 that no resolver
// returns and no URL keeps.
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return ipaddr.IPv4.parse(address).range() === 'unicast';
  if (family !== 6) return false;
  const ip = ipaddr.IPv6.parse(address);
  const embedded = embeddedIPv4(ip);
  if (embedded) return embedded.every((carried) => carried.range() === 'unicast');
  return ip.range() === 'unicast' && ip.match(GLOBAL_UNICAST_V6);
}

// What the refusals that WEBHOOK_ALLOW_LOCAL would lift add, so that whoever reads one (an agent,
// a person on the dashboard, an operator at the CLI) learns which setting of the server decides.
const UNLESS_LOCAL_ALLOWED = ' unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook)';

// Ports below 1024 belong to well-known services (SSH, SMTP, LDAP, IMAP …); a webhook has no reason to
// be there but 443, and refusing them keeps doorbells away from such services on public hosts.
// WEBHOOK_ALLOW_LOCAL lifts this, with the other rules. Port 0 is no destination at all (refused
// above, whatever the setting).
function checkPort(url: URL, policy: WebhookUrlPolicy, field: string): void {
  // Empty when the URL names none or names its scheme's default (443, or 80 for local http).
  if (url.port === '') return;
  const port = Number(url.port);
  if (!policy.allowLocal && port < 1024 && port !== 443) {
    throw invalid(`${field} must use port 443 or a port from 1024 to 65535${UNLESS_LOCAL_ALLOWED}`, field);
  }
}

function parseOutboundUrl(raw: unknown, policy: WebhookUrlPolicy, field: string): URL {
  if (typeof raw !== 'string' || raw.length === 0) throw invalid(`${field} must be a non-empty string`, field);
  if (codePoints(raw) > 2048) throw invalid(`${field} must be at most 2048 characters`, field);
  checkStorableText(raw, field);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid(`${field} must be an absolute URL such as https://example.com/hooks/agent`, field);
  }
  // The URL parser drops tabs, newlines and surrounding spaces and encodes the rest, so such a URL
  // would be saved as given yet called as something else.
  if (/[\s\p{Cc}]/u.test(raw)) throw invalid(`${field} must not contain spaces or control characters such as a newline`, field);
  // What no setting allows is refused first, so that a refusal naming WEBHOOK_ALLOW_LOCAL never
  // hides one that it could not lift.
  if (url.port === '0') throw invalid(`${field} must not use port 0`, field);
  if (url.username || url.password) throw invalid(`${field} must not contain credentials`, field);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw invalid(`${field} must use https://`, field);
  if (url.protocol === 'http:' && !policy.allowLocal) throw invalid(`${field} must use https://${UNLESS_LOCAL_ALLOWED}`, field);
  checkPort(url, policy, field);
  return url;
}

// The addresses a request to this URL may connect to. All of them must be public: a name that
// resolves to one public and one private address is refused rather than raced. The same rules hold
// for every address the service calls out to (a webhook, an OAuth client's metadata document);
// `field` names it in the refusal.
export async function resolveOutboundAddresses(
  raw: unknown,
  policy: WebhookUrlPolicy,
  field = 'webhookUrl',
): Promise<{ url: URL; addresses: { address: string; family: number }[] }> {
  const url = parseOutboundUrl(raw, policy, field);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: { address: string; family: number }[];
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    try {
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch {
      throw invalid(`${field} host ${host} does not resolve`, field);
    }
  }
  if (addresses.length === 0) throw invalid(`${field} host ${host} does not resolve`, field);
  if (!policy.allowLocal && addresses.some((a) => !isPublicAddress(a.address))) {
    throw invalid(`${field} must point to a public address${UNLESS_LOCAL_ALLOWED}; ${host} resolves to a private, loopback or reserved one`, field);
  }
  return { url, addresses };
}

// Returns the URL exactly as given: notifications go to exactly that URL.
export async function checkWebhookUrl(raw: unknown, policy: WebhookUrlPolicy, field = 'webhookUrl'): Promise<string> {
  await resolveOutboundAddresses(raw as string, policy, field);
  return raw as string;
}

// A resolver that answers every look-up with the one address that passed resolveOutboundAddresses,
// so that a connection goes exactly there (no second look-up that a rebinding name could answer
// differently); TLS still verifies the certificate for the URL's host name.
export function pinnedLookup(pinned: { address: string; family: number }): LookupFunction {
  return (_host, opts, callback) => {
    if (opts.all) (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [pinned]);
    else callback(null, pinned.address, pinned.family);
  };
}
