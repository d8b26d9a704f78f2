import { expect, test } from 'bun:test';
import { isPublicAddress } from '../src/domain/webhook-url';

test('public addresses pass, and every loopback, private, reserved or embedded-private form is refused', () => {
  const verdicts = Object.fromEntries(
    [
      '8.8.8.8', '11.1.2.3', '172.32.0.1', '93.184.216.34', '2606:4700::1111', '::ffff:8.8.8.8', '2002:808:808::1',
      '0.0.0.0', '10.0.0.1', '100.64.0.1', '127.0.0.1', '169.254.169.254', '172.16.0.1', '172.31.255.255',
      '192.168.1.1', '198.18.0.1', '224.0.0.1', '255.255.255.255',
      '::', '::1', 'fe80::1', 'fd00::1', 'fec0::1', 'ff02::1', '2001:db8::1', '2001:0:4136:e378::1',
      '::ffff:127.0.0.1', '::127.0.0.1', '::10.0.0.1', '64:ff9b::10.0.0.1', '2002:7f00:1::1', '2002:a9fe:a9fe::1',
    ].map((a) => [a, isPublicAddress(a)]),
  );
  expect(verdicts).toEqual({
    '8.8.8.8': true, '11.1.2.3': true, '172.32.0.1': true, '93.184.216.34': true, '2606:4700::1111': true,
    '::ffff:8.8.8.8': true, '2002:808:808::1': true,
    '0.0.0.0': false, '10.0.0.1': false, '100.64.0.1': false, '127.0.0.1': false, '169.254.169.254': false,
    '172.16.0.1': false, '172.31.255.255': false, '192.168.1.1': false, '198.18.0.1': false, '224.0.0.1': false,
    '255.255.255.255': false, '::': false, '::1': false, 'fe80::1': false, 'fd00::1': false, 'fec0::1': false,
    'ff02::1': false, '2001:db8::1': false, '2001:0:4136:e378::1': false, '::ffff:127.0.0.1': false,
    '::127.0.0.1': false, '::10.0.0.1': false, '64:ff9b::10.0.0.1': false, '2002:7f00:1::1': false,
    '2002:a9fe:a9fe::1': false,
  });
  expect(isPublicAddress('not an address')).toBe(false);
});
