import { describe, expect, test } from 'bun:test';
import { DomainError } from '../src/domain/shared/errors';
import { checkWebhookUrl, isPublicAddress } from '../src/domain/agents/webhook-url';

// One address inside every entry of the IANA IPv4 Special-Purpose Address Registry, plus the
// multicast block, each with the entry it stands for.
const SPECIAL_V4: [string, string][] = [
  ['0.0.0.0/8 "this network"', '0.1.2.3'],
  ['0.0.0.0/32 "this host on this network"', '0.0.0.0'],
  ['10.0.0.0/8 private-use', '10.1.2.3'],
  ['100.64.0.0/10 shared address space', '100.127.255.254'],
  ['127.0.0.0/8 loopback', '127.0.0.1'],
  ['169.254.0.0/16 link local (cloud metadata)', '169.254.169.254'],
  ['172.16.0.0/12 private-use', '172.31.255.255'],
  ['192.0.0.0/24 IETF protocol assignments', '192.0.0.100'],
  ['192.0.0.0/29 IPv4 service continuity prefix', '192.0.0.1'],
  ['192.0.0.8/32 IPv4 dummy address', '192.0.0.8'],
  ['192.0.0.9/32 Port Control Protocol anycast', '192.0.0.9'],
  ['192.0.0.10/32 TURN anycast', '192.0.0.10'],
  ['192.0.0.170/32 NAT64/DNS64 discovery', '192.0.0.170'],
  ['192.0.0.171/32 NAT64/DNS64 discovery', '192.0.0.171'],
  ['192.0.2.0/24 documentation (TEST-NET-1)', '192.0.2.1'],
  ['192.31.196.0/24 AS112-v4', '192.31.196.1'],
  ['192.52.193.0/24 AMT', '192.52.193.1'],
  ['192.88.99.0/24 deprecated 6to4 relay anycast', '192.88.99.1'],
  ['192.88.99.2/32 6a44 relay anycast', '192.88.99.2'],
  ['192.168.0.0/16 private-use', '192.168.1.1'],
  ['192.175.48.0/24 direct delegation AS112 service', '192.175.48.1'],
  ['198.18.0.0/15 benchmarking', '198.19.255.1'],
  ['198.51.100.0/24 documentation (TEST-NET-2)', '198.51.100.1'],
  ['203.0.113.0/24 documentation (TEST-NET-3)', '203.0.113.1'],
  ['240.0.0.0/4 reserved', '250.1.2.3'],
  ['255.255.255.255/32 limited broadcast', '255.255.255.255'],
  ['224.0.0.0/4 multicast', '239.255.255.250'],
];

// The same for the IANA IPv6 Special-Purpose Address Registry, plus multicast, the deprecated
// site-local and IPv4-compatible forms, and space IANA has not allocated for global unicast.
// Forms that carry an IPv4 address carry a private one here; see the embedded tests below.
const SPECIAL_V6: [string, string][] = [
  ['::1/128 loopback', '::1'],
  ['::/128 unspecified', '::'],
  ['::ffff:0:0/96 IPv4-mapped', '::ffff:10.0.0.1'],
  ['64:ff9b::/96 IPv4-IPv6 translation', '64:ff9b::a00:1'],
  ['64:ff9b:1::/48 local-use IPv4-IPv6 translation', '64:ff9b:1::808:808'],
  ['100::/64 discard-only', '100::1'],
  ['100:0:0:1::/64 dummy prefix', '100:0:0:1::1'],
  ['2001::/23 IETF protocol assignments', '2001:100::1'],
  ['2001::/32 Teredo', '2001:0:4136:e378:8000:63bf:f5ff:fffe'],
  ['2001:1::1/128 Port Control Protocol anycast', '2001:1::1'],
  ['2001:1::2/128 TURN anycast', '2001:1::2'],
  ['2001:1::3/128 DNS-SD service registration protocol anycast', '2001:1::3'],
  ['2001:2::/48 benchmarking', '2001:2::1'],
  ['2001:3::/32 AMT', '2001:3::1'],
  ['2001:4:112::/48 AS112-v6', '2001:4:112::1'],
  ['2001:10::/28 deprecated ORCHID', '2001:10::1'],
  ['2001:20::/28 ORCHIDv2', '2001:20::1'],
  ['2001:30::/28 drone remote ID protocol entity tags', '2001:30::1'],
  ['2001:db8::/32 documentation', '2001:db8::1'],
  ['2002::/16 6to4', '2002:a00:1::1'],
  ['2620:4f:8000::/48 direct delegation AS112 service', '2620:4f:8000::1'],
  ['3fff::/20 documentation', '3fff::1'],
  ['5f00::/16 segment routing (SRv6) SIDs', '5f00::1'],
  ['fc00::/7 unique-local', 'fd12:3456::1'],
  ['fe80::/10 link-local', 'fe80::1'],
  ['fe80::/10 link-local with a zone', 'fe80::1%eth0'],
  ['ff00::/8 multicast', 'ff02::1'],
  ['fec0::/10 deprecated site-local', 'fec0::1'],
  ['::/96 deprecated IPv4-compatible', '::808:808'],
  ['::ffff:0:0:0/96 IPv4-translated', '::ffff:0:127.0.0.1'],
  ['outside 2000::/3, not allocated for unicast', '4000::1'],
];

const PUBLIC = ['8.8.8.8', '1.1.1.1', '11.1.2.3', '172.32.0.1', '93.184.216.34', '2606:4700::1111', '2a00:1450:4001:80b::200e'];

// Every way an IPv6 address carries an IPv4 one that it reaches.
const EMBEDDINGS: [string, (v4: string) => string][] = [
  ['IPv4-mapped', (v4) => `::ffff:${v4}`],
  ['IPv4-translated', (v4) => `::ffff:0:${v4}`],
  ['NAT64 well-known prefix', (v4) => `64:ff9b::${v4}`],
  ['6to4', (v4) => `2002:${hex(v4, 0)}:${hex(v4, 2)}::1`],
  // The client address is stored inverted; the server (here 65.54.227.120) is public.
  ['Teredo client', (v4) => `2001:0:4136:e378:8000:63bf:${hex(v4, 0, 0xff)}:${hex(v4, 2, 0xff)}`],
];
function hex(v4: string, from: number, xor = 0): string {
  const octets = v4.split('.').map((o) => Number(o) ^ xor);
  return ((octets[from]! << 8) | octets[from + 1]!).toString(16);
}

describe('which addresses a webhook may reach', () => {
  test('one address in every IPv4 special-purpose range is refused', () => {
    expect(SPECIAL_V4.filter(([, address]) => isPublicAddress(address))).toEqual([]);
  });

  test('one address in every IPv6 special-purpose range is refused', () => {
    expect(SPECIAL_V6.filter(([, address]) => isPublicAddress(address))).toEqual([]);
  });

  test('public unicast addresses are allowed', () => {
    expect(PUBLIC.filter((address) => !isPublicAddress(address))).toEqual([]);
  });

  test('an IPv6 address carrying an IPv4 one is judged by the IPv4 address it carries', () => {
    const verdicts = EMBEDDINGS.flatMap(([form, embed]) => [
      ...SPECIAL_V4.map(([range, v4]) => [`${form} of ${range}`, embed(v4)] as const)
        .filter(([, address]) => isPublicAddress(address)),
      ...PUBLIC.filter((a) => a.includes('.'))
        .map((v4) => [`${form} of ${v4}`, embed(v4)] as const)
        .filter(([, address]) => !isPublicAddress(address)),
    ]);
    expect(verdicts).toEqual([]);
  });

  test('a Teredo address is refused when its server is not public', () => {
    expect(isPublicAddress('2001:0:a00:1:8000:63bf:f7f7:f7f7')).toBe(false);
  });

  test('anything that is not an address in its usual notation is refused', () => {
    for (const text of ['not an address', '', '010.0.0.1', '0x7f.1', '127.1', '::ffff:010.0.0.1']) {
      expect([text, isPublicAddress(text)]).toEqual([text, false]);
    }
  });
});

const refusal = (raw: unknown, allowLocal = false) =>
  checkWebhookUrl(raw, { allowLocal }).then(
    () => null,
    (error: DomainError) => [error.kind, error.message],
  );

describe('which URLs a webhook may have', () => {
  test('control characters are refused, naming the field, rather than saved as given', async () => {
    for (const raw of ['https://8.8.8.8/hook\n', 'https://8.8.8.8/ho\rok', 'https://8.8.8.8/\thook', 'https://8.8.8.8/\u007f', 'https://8.8.8.8/\u0085', ' https://8.8.8.8/hook', 'https://8.8.8.8/a hook']) {
      expect([raw, await refusal(raw)]).toEqual([raw, ['invalid', 'webhookUrl must not contain spaces or control characters such as a newline']]);
      expect([raw, await refusal(raw, true)]).toEqual([raw, ['invalid', 'webhookUrl must not contain spaces or control characters such as a newline']]);
    }
  });

  test('text the database would not keep as given is refused with the same sentence as elsewhere', async () => {
    expect(await refusal('https://8.8.8.8/\u0000')).toEqual(['invalid', 'webhookUrl must not contain the NUL character (U+0000)']);
    expect(await refusal('https://8.8.8.8/\ud800')).toEqual([
      'invalid',
      'webhookUrl must not contain an unpaired surrogate (U+D800 to U+DFFF), which is not valid Unicode',
    ]);
  });

  test('the 2048-character bound counts code points: an emoji is one character', async () => {
    const emoji = '\u{1F600}';
    const atBound = `https://8.8.8.8/${emoji.repeat(2048 - 'https://8.8.8.8/'.length)}`;
    expect(await refusal(atBound)).toBeNull();
    expect(await refusal(`${atBound}${emoji}`)).toEqual(['invalid', 'webhookUrl must be at most 2048 characters']);
  });

  test('https may use port 443 or 1024 to 65535; well-known service ports and port 0 are refused', async () => {
    for (const url of ['https://8.8.8.8/hook', 'https://8.8.8.8:443/hook', 'https://8.8.8.8:1024/hook', 'https://8.8.8.8:8443/hook', 'https://8.8.8.8:65535/hook']) {
      expect([url, await refusal(url)]).toEqual([url, null]);
    }
    for (const url of ['https://8.8.8.8:22/hook', 'https://8.8.8.8:25/hook', 'https://8.8.8.8:80/hook', 'https://8.8.8.8:1023/hook']) {
      expect([url, await refusal(url)]).toEqual([
        url,
        ['invalid', 'webhookUrl must use port 443 or a port from 1024 to 65535 unless WEBHOOK_ALLOW_LOCAL=true is set (for the server, and for ams when ams registers the webhook)'],
      ]);
    }
    expect(await refusal('https://8.8.8.8:0/hook')).toEqual(['invalid', 'webhookUrl must not use port 0']);
  });

  // An operator who tries a local handler first learns which setting of the server would let it
  // through, and is not sent to it for what no setting allows.
  test('a refusal names WEBHOOK_ALLOW_LOCAL exactly when that setting would allow the URL', async () => {
    const refused = [
      'http://8.8.8.8/hook',
      'http://127.0.0.1:9/hook',
      'https://127.0.0.1/hook',
      'https://localhost:8443/hook',
      'https://10.1.2.3/hook',
      'https://[::1]/hook',
      'https://8.8.8.8:25/hook',
      'ftp://8.8.8.8/hook',
      'https://8.8.8.8:0/hook',
      'http://127.0.0.1:0/hook',
      'https://user:pw@127.0.0.1/hook',
      'http://user:pw@127.0.0.1/hook',
      'https://127.0.0.1/a hook',
    ];
    const named = [];
    for (const url of refused) {
      const [strict, local] = [await refusal(url), await refusal(url, true)];
      expect([url, strict === null]).toEqual([url, false]);
      named.push([url, String(strict![1]).includes('WEBHOOK_ALLOW_LOCAL'), local === null]);
    }
    expect(named.filter(([, names, lifts]) => names !== lifts)).toEqual([]);
    expect(named.filter(([, names]) => names).map(([url]) => url)).toEqual(refused.slice(0, 7));
  });

  test('local development may use any port but 0', async () => {
    for (const url of ['http://127.0.0.1:9/hook', 'http://127.0.0.1/hook', 'https://127.0.0.1:25/hook']) {
      expect([url, await refusal(url, true)]).toEqual([url, null]);
    }
    expect(await refusal('http://127.0.0.1:0/hook', true)).toEqual(['invalid', 'webhookUrl must not use port 0']);
  });

  test('an accepted URL is returned exactly as given', async () => {
    expect(await checkWebhookUrl('https://8.8.8.8:8443/hooks/Agent?x=1#f', { allowLocal: false })).toBe('https://8.8.8.8:8443/hooks/Agent?x=1#f');
  });
});
