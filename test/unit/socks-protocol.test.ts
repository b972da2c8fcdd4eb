import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ProxyError, SocksReply } from '../../src/core/errors.js';
import {
  SocksHandshakeParser,
  encodeMethodSelection,
  encodeSocks4Reply,
  encodeSocks5Reply,
  noAuthPolicy,
  parseSocks4Request,
  parseSocks5Greeting,
  parseSocks5Request,
  type SocksStep,
} from '../../src/listeners/socks-protocol.js';

const b = (...bytes: number[]): Buffer => Buffer.from(bytes);
const port = (p: number): number[] => [p >> 8, p & 0xff];
const domainReq = (name: string | Buffer, p = 80, cmd = 1): Buffer => {
  const n = typeof name === 'string' ? Buffer.from(name, 'latin1') : name;
  return Buffer.concat([b(5, cmd, 0, 3, n.length), n, b(...port(p))]);
};

/** Feeds one byte at a time, collecting every non-'more' step. */
function feedBytewise(input: Buffer, afterGreeting = true): SocksStep[] {
  const p = new SocksHandshakeParser();
  const steps: SocksStep[] = [];
  for (const byte of input) {
    p.push(b(byte));
    for (let s = p.next(); s.type !== 'more'; s = p.next()) {
      steps.push(s);
      if (s.type === 'greeting' && afterGreeting) p.methodSelected(noAuthPolicy.selectMethod(s.methods));
      if (p.finished) return steps;
    }
  }
  return steps;
}

function rejectCode(step: SocksStep): number | undefined {
  return step.type === 'reject' ? step.error.socksReply : undefined;
}

test('greeting: methods are reported; policy picks 0x00 only when offered', () => {
  assert.deepEqual(parseSocks5Greeting(b(5, 2, 0, 2)).step, { type: 'greeting', methods: [0, 2] });
  assert.equal(parseSocks5Greeting(b(5, 2, 0)).step.type, 'more');
  assert.deepEqual(parseSocks5Greeting(b(5, 0)).step, { type: 'greeting', methods: [] });
  assert.equal(noAuthPolicy.selectMethod([0x02, 0x00]), 0x00);
  assert.equal(noAuthPolicy.selectMethod([0x02]), 0xff);
  assert.equal(noAuthPolicy.selectMethod([]), 0xff);
  assert.deepEqual(encodeMethodSelection(0xff), b(5, 0xff));
});

test('request: every address type, fed byte by byte', () => {
  const greeting = b(5, 1, 0);
  const cases: Array<[Buffer, object]> = [
    [b(5, 1, 0, 1, 10, 0, 0, 7, ...port(5432)), { host: '10.0.0.7', port: 5432, type: 'ipv4' }],
    [b(5, 1, 0, 4, 0x20, 1, 0x0d, 0xb8, ...new Array(11).fill(0), 1, ...port(443)), { host: '2001:db8::1', port: 443, type: 'ipv6' }],
    [b(5, 1, 0, 4, ...new Array(10).fill(0), 0xff, 0xff, 10, 1, 2, 3, ...port(80)), { host: '::ffff:10.1.2.3', port: 80, type: 'ipv6' }],
    [domainReq('web.shop.svc.cluster.local', 8080), { host: 'web.shop.svc.cluster.local', port: 8080, type: 'domain' }],
    [domainReq('10.0.0.9', 80), { host: '10.0.0.9', port: 80, type: 'ipv4' }],
    [domainReq('x'.repeat(255), 1), { host: 'x'.repeat(255), port: 1, type: 'domain' }],
  ];
  for (const [req, destination] of cases) {
    const steps = feedBytewise(Buffer.concat([greeting, req]));
    assert.equal(steps.length, 2);
    assert.deepEqual(steps[0], { type: 'greeting', methods: [0] });
    assert.deepEqual(steps[1], { type: 'connect', version: 5, destination });
  }
});

test('pipelined bytes after the request stay in rest()', () => {
  const p = new SocksHandshakeParser();
  p.push(Buffer.concat([b(5, 1, 0), b(5, 1, 0, 1, 127, 0, 0, 1, 0, 80), Buffer.from('GET / HTTP/1.0\r\n\r\n')]));
  const g = p.next();
  assert.equal(g.type, 'greeting');
  p.methodSelected(0);
  assert.equal(p.next().type, 'connect');
  assert.equal(p.rest().toString(), 'GET / HTTP/1.0\r\n\r\n');
});

test('request errors map to the RFC 1928 reply codes', () => {
  assert.equal(rejectCode(parseSocks5Request(b(5, 2, 0, 1)).step), SocksReply.commandNotSupported); // BIND
  assert.equal(rejectCode(parseSocks5Request(b(5, 3, 0, 1)).step), SocksReply.commandNotSupported); // UDP ASSOCIATE
  assert.equal(rejectCode(parseSocks5Request(b(5, 9, 0, 1)).step), SocksReply.commandNotSupported);
  assert.equal(rejectCode(parseSocks5Request(b(5, 1, 0, 2, 0, 0)).step), SocksReply.addressTypeNotSupported);
  assert.equal(rejectCode(parseSocks5Request(domainReq('')).step), SocksReply.generalFailure);
  assert.equal(rejectCode(parseSocks5Request(domainReq('a\0b')).step), SocksReply.hostUnreachable);
  assert.equal(rejectCode(parseSocks5Request(domainReq('a b')).step), SocksReply.hostUnreachable);
  assert.equal(rejectCode(parseSocks5Request(domainReq(b(0x80, 0x41))).step), SocksReply.hostUnreachable);
  assert.equal(rejectCode(parseSocks5Request(b(5, 1, 0, 1, 1, 2, 3, 4, 0, 0)).step), SocksReply.generalFailure); // port 0
  assert.equal(parseSocks5Request(b(4, 1, 0, 1)).step.type, 'close'); // version ≠ 5 after greeting
  assert.equal(parseSocks5Request(b(5, 1, 0, 3, 200, 1, 2)).step.type, 'more'); // length not yet satisfied
});

test('first byte decides the protocol; an HTTP method is answered, anything else is dropped', () => {
  for (const first of [0x00, 0x16, 0x61, 0xff]) {
    const p = new SocksHandshakeParser();
    p.push(b(first, 1, 2, 3));
    assert.equal(p.next().type, 'close');
  }
  const hello = new SocksHandshakeParser();
  hello.push(b(0x16));
  assert.equal(hello.next().type, 'more', 'one byte cannot tell a ClientHello');
  hello.push(b(0x03, 0x01));
  assert.equal(hello.next().type, 'tls');
  for (const method of ['GET ', 'CONNECT ', 'POST ']) {
    const p = new SocksHandshakeParser();
    p.push(Buffer.from(method));
    assert.equal(p.next().type, 'http');
  }
  const p = new SocksHandshakeParser();
  p.push(b(5, 1, 2));
  assert.equal(p.next().type, 'greeting');
  p.methodSelected(0xff);
  assert.equal(p.finished, true);
});

test('SOCKS4 and SOCKS4A requests', () => {
  const v4 = Buffer.concat([b(4, 1, ...port(8080), 10, 1, 2, 3), Buffer.from('alice\0')]);
  assert.deepEqual(feedBytewise(v4), [{ type: 'connect', version: 4, destination: { host: '10.1.2.3', port: 8080, type: 'ipv4' }, userId: 'alice' }]);
  const v4a = Buffer.concat([b(4, 1, ...port(80), 0, 0, 0, 1), Buffer.from('\0web.shop\0')]);
  assert.deepEqual(feedBytewise(v4a), [{ type: 'connect', version: 4, destination: { host: 'web.shop', port: 80, type: 'domain' }, userId: '' }]);
  const rest = parseSocks4Request(Buffer.concat([v4a, Buffer.from('payload')]));
  assert.equal(rest.consumed, v4a.length);
});

test('SOCKS4 rejections', () => {
  const bind = Buffer.concat([b(4, 2, 0, 80, 10, 0, 0, 1), b(0)]);
  assert.equal(parseSocks4Request(bind).step.type, 'reject');
  const zeroIp = Buffer.concat([b(4, 1, 0, 80, 0, 0, 0, 0), b(0)]);
  assert.equal(parseSocks4Request(zeroIp).step.type, 'reject');
  const longUser = Buffer.concat([b(4, 1, 0, 80, 10, 0, 0, 1), Buffer.alloc(300, 0x41)]);
  assert.equal(parseSocks4Request(longUser).step.type, 'reject');
  const longHost = Buffer.concat([b(4, 1, 0, 80, 0, 0, 0, 9, 0), Buffer.alloc(300, 0x41)]);
  assert.equal(parseSocks4Request(longHost).step.type, 'reject');
  const emptyHost = Buffer.concat([b(4, 1, 0, 80, 0, 0, 0, 9, 0, 0)]);
  assert.equal(parseSocks4Request(emptyHost).step.type, 'reject');
  const badHost = Buffer.concat([b(4, 1, 0, 80, 0, 0, 0, 9, 0), Buffer.from('a\x01b\0')]);
  assert.equal(parseSocks4Request(badHost).step.type, 'reject');
  assert.equal(parseSocks4Request(b(4, 1, 0, 80, 10, 0, 0, 1, 0x41)).step.type, 'more');
});

test('reply encoding: bound address as IPv4/IPv6, mapped IPv6 as IPv4', () => {
  assert.deepEqual(encodeSocks5Reply(0, { address: '127.0.0.1', port: 1080 }), b(5, 0, 0, 1, 127, 0, 0, 1, 0x04, 0x38));
  assert.deepEqual(encodeSocks5Reply(0, { address: '::ffff:127.0.0.1', port: 1 }), b(5, 0, 0, 1, 127, 0, 0, 1, 0, 1));
  assert.deepEqual(encodeSocks5Reply(0, { address: '::1', port: 2 }), b(5, 0, 0, 4, ...new Array(15).fill(0), 1, 0, 2));
  assert.deepEqual(encodeSocks5Reply(5), b(5, 5, 0, 1, 0, 0, 0, 0, 0, 0));
  assert.deepEqual(encodeSocks4Reply(true), b(0, 0x5a, 0, 0, 0, 0, 0, 0));
  assert.deepEqual(encodeSocks4Reply(false), b(0, 0x5b, 0, 0, 0, 0, 0, 0));
});

test('10k random bytes in random chunks never throw and yield only typed steps', () => {
  for (let round = 0; round < 300; round++) {
    const input = randomBytes(10_000);
    // Bias towards the interesting paths: valid version bytes and small lengths.
    input[0] = round % 3 === 0 ? 5 : round % 3 === 1 ? 4 : input[0]!;
    if (round % 2 === 0) input[1] = input[1]! % 4;
    const p = new SocksHandshakeParser();
    let offset = 0;
    while (offset < input.length && !p.finished) {
      const n = 1 + Math.floor(Math.random() * 64);
      p.push(input.subarray(offset, offset + n));
      offset += n;
      for (let s = p.next(); s.type !== 'more'; s = p.next()) {
        assert.ok(['greeting', 'connect', 'reject', 'close', 'http', 'tls'].includes(s.type));
        if (s.type === 'reject') assert.ok(s.error instanceof ProxyError);
        if (s.type === 'greeting') p.methodSelected(0);
        if (p.finished) break;
      }
    }
  }
});
