import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CidrIndex, parseCidr, parseIp } from '../../src/core/cidr.js';

test('IP literals: canonical text, IPv4-mapped IPv6 taken as IPv4, no zone ids', () => {
  assert.deepEqual([parseIp('10.0.0.1')?.family, parseIp('10.0.0.1')?.text], [4, '10.0.0.1']);
  assert.deepEqual([parseIp('::ffff:10.0.0.1')?.family, parseIp('::FFFF:a00:1')?.text], [4, '10.0.0.1']);
  assert.equal(parseIp('[FD00:0::A]')?.text, 'fd00::a');
  for (const bad of ['010.0.0.1', '1.2.3', 'fe80::1%eth0', 'example.com', '']) assert.equal(parseIp(bad), undefined, bad);
});

test('CIDR blocks: canonical, bare addresses are hosts, host bits and bad prefixes refused', () => {
  assert.equal(parseCidr('10.96.0.0/12').text, '10.96.0.0/12');
  assert.equal(parseCidr('FD00:10:96:0::/112').text, 'fd00:10:96::/112');
  assert.equal(parseCidr('10.1.2.3').text, '10.1.2.3/32');
  assert.equal(parseCidr('::1').text, '::1/128');
  assert.equal(parseCidr('::ffff:10.0.0.0/104').text, '10.0.0.0/8');
  assert.equal(parseCidr('0.0.0.0/0').text, '0.0.0.0/0');
  assert.throws(() => parseCidr('10.96.0.1/12'), /host bits set; did you mean 10\.96\.0\.0\/12\?/);
  assert.throws(() => parseCidr('fd00::1/64'), /did you mean fd00::\/64\?/);
  assert.throws(() => parseCidr('10.0.0.0/33'), /0 to 32/);
  assert.throws(() => parseCidr('10.0.0.0/x'), /0 to 32/);
  assert.throws(() => parseCidr('::ffff:10.0.0.0/64'), /at least 96/);
  assert.throws(() => parseCidr('[fd00::]/64'), /not a CIDR block/);
});

test('CidrIndex: longest prefix wins, per family, mapped addresses as IPv4', () => {
  const idx = new CidrIndex<string>();
  for (const [c, v] of [
    ['10.0.0.0/8', 'a'],
    ['10.96.0.0/12', 'b'],
    ['10.96.5.0/24', 'c'],
    ['0.0.0.0/0', 'any4'],
    ['fd00::/8', 'd'],
    ['fd00:10::/32', 'e'],
  ] as const)
    idx.add(parseCidr(c), v);
  const at = (ip: string) => idx.lookup(parseIp(ip)!)?.value;
  assert.equal(at('10.1.1.1'), 'a');
  assert.equal(at('10.100.1.1'), 'b');
  assert.equal(at('10.96.5.255'), 'c');
  assert.equal(at('::ffff:10.96.5.1'), 'c');
  assert.equal(at('11.0.0.1'), 'any4');
  assert.equal(at('fd00:10::1'), 'e');
  assert.equal(at('fd01::1'), 'd');
  assert.equal(at('2001:db8::1'), undefined);
  assert.equal(idx.lookup(parseIp('11.0.0.1')!, 1), undefined);
  assert.equal(idx.add(parseCidr('10.0.0.0/8'), 'again'), 'a');
  assert.equal(at('10.1.1.1'), 'a');
  assert.equal(idx.size, 6);
});
