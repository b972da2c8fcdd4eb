import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import {
  canonicalIPv6,
  destinationFor,
  formatHostPort,
  formatIPv6,
  inetAton,
  ipv6ToBytes,
  isLoopbackHost,
  parseAuthority,
  parseConnectTarget,
  parseListenAddress,
} from '../../src/core/address.js';

test('parseListenAddress accepts the documented forms', () => {
  assert.deepEqual(parseListenAddress('127.0.0.1:1080'), { host: '127.0.0.1', port: 1080 });
  assert.deepEqual(parseListenAddress('[::1]:1080'), { host: '::1', port: 1080 });
  assert.deepEqual(parseListenAddress('localhost:0'), { host: 'localhost', port: 0 });
  assert.deepEqual(parseListenAddress(':1080'), { host: '127.0.0.1', port: 1080 });
  assert.deepEqual(parseListenAddress(' 0.0.0.0:8080 '), { host: '0.0.0.0', port: 8080 });
  assert.deepEqual(parseListenAddress('[::]:65535'), { host: '::', port: 65535 });
});

test('parseListenAddress rejects bad input with a message that says why', () => {
  const cases: Array<[string, RegExp]> = [
    ['', /empty/],
    ['1080', /missing ":PORT"/],
    ['localhost', /missing ":PORT"/],
    ['::1:1080', /brackets/],
    ['[::1]1080', /missing ":PORT" after "]"/],
    ['[::1:1080', /missing "]"/],
    ['[nope]:1080', /not an IPv6 address/],
    ['127.0.0.1:65536', /port "65536"/],
    ['127.0.0.1:-1', /port "-1"/],
    ['127.0.0.1:', /port ""/],
    ['127.0.0.1:http', /port "http"/],
    ['bad host:80', /not a valid host/],
    ['a/b:80', /not a valid host/],
  ];
  for (const [input, re] of cases) {
    assert.throws(
      () => parseListenAddress(input),
      (err: Error) => re.test(err.message) && err.message.includes(input.trim() || 'empty'),
      input,
    );
  }
});

test('formatHostPort brackets IPv6 only', () => {
  assert.equal(formatHostPort('127.0.0.1', 80), '127.0.0.1:80');
  assert.equal(formatHostPort('web.shop', 8080), 'web.shop:8080');
  assert.equal(formatHostPort('::1', 1080), '[::1]:1080');
});

test('isLoopbackHost', () => {
  for (const h of ['localhost', 'LOCALHOST', 'x.localhost', '127.0.0.1', '127.1.2.3', '::1', '[::1]', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1']) {
    assert.equal(isLoopbackHost(h), true, h);
  }
  for (const h of ['0.0.0.0', '::', '10.0.0.1', '128.0.0.1', 'example.com', '::2', '::ffff:10.0.0.1', 'localhost.example']) {
    assert.equal(isLoopbackHost(h), false, h);
  }
});

test('IPv6 text round-trips to RFC 5952 canonical form', () => {
  const cases: Array<[string, string]> = [
    ['::', '::'],
    ['::1', '::1'],
    ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:0db8:0000:0000:0001:0000:0000:0000', '2001:db8:0:0:1::'],
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
    ['fe80::0:0:1', 'fe80::1'],
    ['1:0:0:2:0:0:0:3', '1:0:0:2::3'],
    ['::ffff:1.2.3.4', '::ffff:1.2.3.4'],
    ['::ffff:0102:0304', '::ffff:1.2.3.4'],
    ['::1.2.3.4', '::102:304'],
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
  ];
  for (const [input, want] of cases) assert.equal(canonicalIPv6(input), want, input);
  assert.equal(ipv6ToBytes('1.2.3.4'), undefined);
  assert.equal(ipv6ToBytes('fe80::1%eth0'), undefined);
  assert.equal(formatIPv6(Buffer.alloc(16)), '::');
  assert.throws(() => formatIPv6(Buffer.alloc(4)), RangeError);
});

test('destinationFor types IP literals and canonicalises IPv6', () => {
  assert.deepEqual(destinationFor('web.shop', 80), { host: 'web.shop', port: 80, type: 'domain' });
  assert.deepEqual(destinationFor('10.1.2.3', 80), { host: '10.1.2.3', port: 80, type: 'ipv4' });
  assert.deepEqual(destinationFor('[FD00::0:1]', 80), { host: 'fd00::1', port: 80, type: 'ipv6' });
});

test("IPv4 in inet_aton's other spellings is the address the system resolver reads, not a name", async () => {
  const spellings: Array<[string, string]> = [
    ['2130706434', '127.0.0.2'],
    ['127.2', '127.0.0.2'],
    ['127.0.2', '127.0.0.2'],
    ['0x7f.0.0.2', '127.0.0.2'],
    ['0177.0.0.2', '127.0.0.2'],
    ['010.0.0.1', '8.0.0.1'],
    ['0x7F000002', '127.0.0.2'],
    ['169.254.43518', '169.254.169.254'],
    ['0', '0.0.0.0'],
    ['4294967295', '255.255.255.255'],
    ['10.0.0.1.', '10.0.0.1'],
  ];
  for (const [text, address] of spellings) {
    assert.equal(inetAton(text), address, text);
    assert.deepEqual(destinationFor(text, 80), { host: address, port: 80, type: 'ipv4' }, text);
    // glibc parses these itself (inet_aton): no DNS query leaves the machine.
    if (!text.endsWith('.')) assert.equal((await lookup(text, { family: 4 })).address, address, `the resolver reads ${text} as ${address}`);
  }
  for (const name of ['example.com', '1.2.3.4.5', '08.0.0.1', '0x', '256.1.1.1', '1.2.65536', '4294967296', '1..2', 'a.1', '-1', '1e3', ' 1']) {
    assert.equal(inetAton(name), undefined, name);
  }
  assert.deepEqual(parseAuthority('0x7f.1:443'), { host: '127.0.0.1', port: 443, type: 'ipv4' });
});

test('parseAuthority (CONNECT targets)', () => {
  assert.deepEqual(parseAuthority('web.shop:443'), { host: 'web.shop', port: 443, type: 'domain' });
  assert.deepEqual(parseAuthority('10.0.0.1:5432'), { host: '10.0.0.1', port: 5432, type: 'ipv4' });
  assert.deepEqual(parseAuthority('[fd00::1]:80'), { host: 'fd00::1', port: 80, type: 'ipv6' });
  for (const bad of ['web.shop', 'web.shop:', 'web.shop:0', 'web.shop:70000', ':80', '[fd00::1]', '[x]:80', 'fd00::1:80', 'a b:80', '/path', 'http://x:80']) {
    assert.equal(parseAuthority(bad), undefined, bad);
  }
  // CONNECT alone takes a bare IPv6 literal: its port is never optional.
  assert.deepEqual(parseConnectTarget('fd00::1:80'), { host: 'fd00::1', port: 80, type: 'ipv6' });
  assert.deepEqual(parseConnectTarget('web.shop:443'), { host: 'web.shop', port: 443, type: 'domain' });
  for (const bad of ['fd00::1', 'fd00::1:0', '1:2:3:4:5:6:7:8', '[fd00::1]:80x', 'fe80::1%eth0:80', ':80']) {
    assert.equal(parseConnectTarget(bad), undefined, bad);
  }
});
