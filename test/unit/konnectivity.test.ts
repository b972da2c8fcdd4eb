// The konnectivity packet codec (upstream's wire format), the mapping of the server's answers to
// SOCKS/HTTP replies, server address parsing, and KonnectivityStreams over a fake dialer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { decodePacket, encodePacket, newDialId, type Packet } from '../../src/konnectivity/packet.js';
import { formatHostPort } from '../../src/core/address.js';
import { connectAnswerError, dialFailure } from '../../src/konnectivity/errors.js';
import { parseServerAddress } from '../../src/konnectivity/options.js';
import { ConnectionRefusedError, HostUnreachableError, NotAllowedError, replyFor, SocksReply } from '../../src/core/errors.js';
import { KonnectivityStreams, type KonnectivityTarget } from '../../src/routes/konnectivity/streams.js';
import type { KonnectivityDialer } from '../../src/konnectivity/dialer.js';
import type { Claim } from '../../src/routing/table.js';
import { createLogger } from '../../src/core/log.js';

test('packets round-trip, int64 ids included', () => {
  const max = 0x7fff_ffff_ffff_ffffn;
  const packets: Packet[] = [
    { type: 'DIAL_REQ', protocol: 'tcp', address: '10.96.0.10:443', random: max },
    { type: 'DIAL_RSP', random: 42n, connectID: 7n, error: '' },
    { type: 'DIAL_RSP', random: 42n, connectID: 0n, error: 'dial tcp 10.0.0.1:80: connect: connection refused' },
    { type: 'DATA', connectID: 7n, data: randomBytes(70_000), error: '' },
    { type: 'CLOSE_REQ', connectID: 7n },
    { type: 'CLOSE_RSP', connectID: 7n, error: 'Unknown connectID' },
    { type: 'DIAL_CLS', random: 5n },
    { type: 'DRAIN' },
  ];
  for (const p of packets) assert.deepEqual(decodePacket(encodePacket(p)), p, p.type);
});

test("the bytes are upstream's: field numbers and enum values of client.proto", () => {
  // Packet{type=DATA(4), data(4)={connectID(1)=7, data(3)="hi"}}
  assert.equal(encodePacket({ type: 'DATA', connectID: 7n, data: Buffer.from('hi'), error: '' }).toString('hex'), '0804' + '2206' + '0807' + '1a026869');
  // Packet{type=DIAL_REQ(0, omitted), dialRequest(2)={protocol(1)="tcp", address(2)="a:1", random(3)=1}}
  assert.equal(encodePacket({ type: 'DIAL_REQ', protocol: 'tcp', address: 'a:1', random: 1n }).toString('hex'), '120c' + '0a03746370' + '1203613a31' + '1801');
  // Packet{type=CLOSE_RSP(3), closeResponse(6)={connectID(2)=9}}
  assert.equal(encodePacket({ type: 'CLOSE_RSP', connectID: 9n, error: '' }).toString('hex'), '0803' + '3202' + '1009');
  // A packet from upstream with the enum value zero left out decodes as DIAL_REQ.
  assert.deepEqual(decodePacket(Buffer.from('1203120161', 'hex')), { type: 'DIAL_REQ', protocol: '', address: 'a', random: 0n });
});

test('dial ids are positive 63-bit and never zero; addresses are Go host:port', () => {
  let calls = 0;
  const id = newDialId((n) => (calls++ === 0 ? Buffer.alloc(n) : Buffer.alloc(n, 0xff)));
  assert.equal(id, 0x7fff_ffff_ffff_ffffn);
  assert.equal(formatHostPort('10.0.0.1', 80), '10.0.0.1:80');
  assert.equal(formatHostPort('fd00::1', 80), '[fd00::1]:80');
});

test("the agent's dial errors map to the SOCKS/HTTP replies", () => {
  const cases: Array<[string, number, number]> = [
    ['dial tcp 10.0.0.1:80: connect: connection refused', SocksReply.connectionRefused, 502],
    ['dial tcp 10.0.0.1:80: i/o timeout', SocksReply.ttlExpired, 504],
    ['timed out waiting for backend dial', SocksReply.ttlExpired, 504],
    ['dial tcp 10.0.0.1:80: connect: no route to host', SocksReply.hostUnreachable, 502],
    ['dial tcp 10.0.0.1:80: connect: network is unreachable', SocksReply.hostUnreachable, 502],
    ['No agent available', SocksReply.generalFailure, 502],
    ['dial closed', SocksReply.hostUnreachable, 502],
    ['something new', SocksReply.hostUnreachable, 502],
  ];
  for (const [text, socks, http] of cases) {
    const r = replyFor(dialFailure(text, '10.0.0.1:80'));
    assert.deepEqual([r.socks, r.http], [socks, http], text);
  }
  assert.equal(dialFailure('connect: connection refused', 'x:1').retryable, true);
});

test('CONNECT answers: the body text first (any server version), then the status', () => {
  const socks = (status: number, body: string) => replyFor(connectAnswerError(status, body, '10.0.0.1:80')).socks;
  assert.equal(socks(502, 'dial tcp 10.0.0.1:80: connect: connection refused'), SocksReply.connectionRefused);
  assert.equal(socks(503, 'dial tcp 10.0.0.1:80: connect: connection refused'), SocksReply.connectionRefused); // servers before mapDialErrorToHTTPStatus
  assert.equal(socks(504, 'dial tcp 10.0.0.1:80: i/o timeout'), SocksReply.ttlExpired);
  assert.equal(socks(504, ''), SocksReply.ttlExpired);
  assert.equal(socks(502, 'tls: bad certificate'), SocksReply.hostUnreachable);
  assert.equal(socks(500, 'currently no tunnels available: No agent available'), SocksReply.generalFailure);
  assert.equal(socks(405, 'this proxy only supports CONNECT passthrough'), SocksReply.generalFailure);
  // The far end's text is quoted, cut short.
  assert.ok(connectAnswerError(502, 'x'.repeat(5000), 'a:1').message.length < 400);
});

test('server addresses: https://host:port or unix:///path', () => {
  assert.deepEqual(parseServerAddress('https://127.0.0.1:8090'), { kind: 'tcp', host: '127.0.0.1', port: 8090 });
  assert.deepEqual(parseServerAddress('https://[::1]:8131'), { kind: 'tcp', host: '::1', port: 8131 });
  assert.deepEqual(parseServerAddress('unix:///etc/kubernetes/konnectivity-server/konnectivity-server.socket'), {
    kind: 'unix',
    path: '/etc/kubernetes/konnectivity-server/konnectivity-server.socket',
  });
  assert.throws(() => parseServerAddress('grpc://k:1'), /https:\/\/host:port/);
  assert.throws(() => parseServerAddress('https://k:1/path'), /only scheme, host and port/);
});

/** A dialer that refuses the addresses listed and connects the rest to a PassThrough. */
function fakeDialer(refuse: Set<string>, dialled: string[]): KonnectivityDialer {
  return {
    server: 'unix:///fake',
    mode: 'grpc',
    async dial(ip, port) {
      dialled.push(`${ip}:${port}`);
      if (refuse.has(`${ip}:${port}`)) throw new ConnectionRefusedError(`${ip}:${port} refused`, { retryable: true });
      return new PassThrough();
    },
    stats: () => ({ dials: dialled.length, failures: 0, open: 0 }),
    close() {},
  };
}

const claim = { claimed: true, host: 'web.shop.guest', isIp: false, reason: 'route-name' } as unknown as Claim;
const request = (port: number) => ({
  destination: { host: 'web.shop.guest', port, type: 'domain' as const },
  frontEnd: 'socks5' as const,
  client: '127.0.0.1:1',
  signal: new AbortController().signal,
});
const log = createLogger('silent');

test('the route resolves through its resolve(), dials through the dialer, and moves past a refusal', async () => {
  const dialled: string[] = [];
  const targets: KonnectivityTarget[] = [
    { ip: '10.244.0.5', port: 8080 },
    { ip: '10.244.0.6', port: 8080 },
  ];
  const seen: Array<[string, number]> = [];
  const route = new KonnectivityStreams(
    'guest',
    { server: 'unix:///fake', mode: 'grpc' },
    {
      log,
      resolve: async (c, port) => {
        seen.push([c.host, port]);
        return targets;
      },
      makeDialer: async () => fakeDialer(new Set(['10.244.0.5:8080']), dialled),
    },
  );
  assert.equal(route.status().state, 'starting');
  await route.start();
  assert.equal(route.status().state, 'ready');
  const opened = await route.open(request(80), claim, new AbortController().signal);
  assert.deepEqual(seen, [['web.shop.guest', 80]]);
  assert.deepEqual(dialled, ['10.244.0.5:8080', '10.244.0.6:8080']);
  assert.equal(opened.via, 'konnectivity unix:///fake → 10.244.0.6:8080');
  const closing = route.close();
  await assert.rejects(route.open(request(80), claim, new AbortController().signal), /closing/);
  opened.stream.destroy();
  await closing;
});

test("the route passes the resolver's refusal through and reports a dialer that cannot start", async () => {
  const route = new KonnectivityStreams(
    'guest',
    { server: 'unix:///fake', mode: 'grpc' },
    {
      log,
      resolve: async () => {
        throw new NotAllowedError('no such namespace');
      },
      makeDialer: async () => fakeDialer(new Set(), []),
    },
  );
  await route.start();
  await assert.rejects(route.open(request(80), claim, new AbortController().signal), NotAllowedError);
  const empty = new KonnectivityStreams(
    'guest',
    { server: 'unix:///fake', mode: 'grpc' },
    { log, resolve: async () => [], makeDialer: async () => fakeDialer(new Set(), []) },
  );
  await empty.start();
  await assert.rejects(empty.open(request(80), claim, new AbortController().signal), HostUnreachableError);
  const claim6 = { ...claim, host: 'fd00:10:96::a', isIp: true } as Claim;
  await assert.rejects(
    empty.open(request(80), claim6, new AbortController().signal),
    (e: Error) => e instanceof HostUnreachableError && e.message.startsWith('[fd00:10:96::a]:80 has no address'),
  );
  const broken = new KonnectivityStreams('guest', { server: 'https://k:1', mode: 'grpc', ca: '/nonexistent/ca.crt' }, { log, resolve: async () => [] });
  await assert.rejects(broken.start(), /konnectivity ca file \/nonexistent\/ca.crt/);
  assert.equal(broken.status().state, 'error');
  assert.match(broken.status().reason ?? '', /nonexistent/);
});

test('the dialer takes IP addresses only: a name never reaches the server', async () => {
  const { createKonnectivityDialer } = await import('../../src/konnectivity/dialer.js');
  const dialer = await createKonnectivityDialer({ server: 'unix:///nonexistent/konnectivity.sock', mode: 'http-connect' });
  await assert.rejects(
    dialer.dial('web.shop.svc.cluster.local', 80, new AbortController().signal),
    (err: unknown) => err instanceof NotAllowedError && replyFor(err).socks === SocksReply.notAllowed,
  );
  assert.equal(dialer.stats().dials, 0);
  dialer.close();
});

test('after a pause the route has its dialer connect anew (a grpc connection may have died in the sleep)', async () => {
  let renewed = 0;
  const route = new KonnectivityStreams(
    'guest',
    { server: 'unix:///fake', mode: 'grpc' },
    { log, resolve: async () => [], makeDialer: async () => ({ ...fakeDialer(new Set(), []), afterPause: () => renewed++ }) },
  );
  route.afterPause(); // before start: no dialer yet, nothing to do
  await route.start();
  route.afterPause();
  assert.equal(renewed, 1);
  await route.close();
});
