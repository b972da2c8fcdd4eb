import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import { SocksProxyAgent } from 'socks-proxy-agent';
import {
  ConnectTimeoutError,
  ConnectionRefusedError,
  HostUnreachableError,
  NoReadyEndpointError,
  NotAllowedError,
  OverloadedError,
  UnsupportedTargetError,
  UpstreamApiError,
} from '../../src/core/errors.js';
import { startSocksListener } from '../../src/listeners/socks-server.js';
import { FakeOpener, LOOPBACK, Reader, connectClient, quietContext, startEcho, tcpStream, waitFor } from './socks-fixtures.test.js';

const b = (...bytes: number[]): Buffer => Buffer.from(bytes);
const domainRequest = (host: string, port: number, cmd = 1): Buffer =>
  Buffer.concat([b(5, cmd, 0, 3, host.length), Buffer.from(host), b(port >> 8, port & 0xff)]);

const echo = await startEcho();
const origin = http.createServer((req, res) => res.end(`hello from ${req.url}`));
origin.listen(0, LOOPBACK);
await once(origin, 'listening');
const originPort = (origin.address() as import('node:net').AddressInfo).port;

const errors: Record<string, Error> = {
  'not-allowed.test': new NotAllowedError('outside every route'),
  'unknown.test': new HostUnreachableError('no such service'),
  'not-ready.test': new NoReadyEndpointError('no ready endpoint'),
  'external.test': new UnsupportedTargetError('ExternalName'),
  'refused.test': new ConnectionRefusedError('nothing listens'),
  'timeout.test': new ConnectTimeoutError('took too long'),
  'api.test': new UpstreamApiError('apiserver said 500'),
  'busy.test': new OverloadedError('stream limit'),
  'bug.test': new Error('untyped failure'),
};
const opener = new FakeOpener(
  {
    'web.test': () => tcpStream(originPort),
    ...Object.fromEntries(Object.entries(errors).map(([host, err]) => [host, () => Promise.reject(err)])),
  },
  () => tcpStream(echo.port),
);
const ctx = quietContext(opener);
const listener = await startSocksListener(LOOPBACK, 0, ctx);
const port = listener.address.port;

after(async () => {
  await listener.close(100);
  echo.close();
  origin.close();
});

/** Greeting + CONNECT; returns the reader positioned after the reply. */
async function socks5(request: Buffer, methods = [0]): Promise<{ reader: Reader; reply: Buffer }> {
  const s = await connectClient(port);
  const reader = new Reader(s);
  s.write(b(5, methods.length, ...methods));
  assert.deepEqual(await reader.read(2), b(5, 0));
  s.write(request);
  const head = await reader.read(4);
  const len = head[3] === 1 ? 6 : head[3] === 4 ? 18 : 0;
  return { reader, reply: Buffer.concat([head, await reader.read(len)]) };
}

async function assertServesNormally(): Promise<void> {
  const { reader, reply } = await socks5(domainRequest('echo.test', 7));
  assert.equal(reply[1], 0);
  reader.socket.end('still alive');
  assert.equal((await reader.rest()).toString(), 'still alive');
}

test('CONNECT by name: success reply carries the real bound address, bytes are relayed', async () => {
  const { reader, reply } = await socks5(domainRequest('echo.test', 7));
  assert.deepEqual(reply.subarray(0, 4), b(5, 0, 0, 1));
  assert.deepEqual([...reply.subarray(4, 8)], [127, 0, 0, 1]);
  assert.equal(reply.readUInt16BE(8), port);
  reader.socket.write('ping');
  assert.equal((await reader.read(4)).toString(), 'ping');
  reader.socket.end();
  await reader.rest();
  const req = opener.requests.find((r) => r.destination.host === 'echo.test');
  assert.deepEqual(req?.destination, { host: 'echo.test', port: 7, type: 'domain' });
  assert.equal(req?.frontEnd, 'socks5');
  assert.match(req?.client ?? '', /^127\.0\.0\.1:\d+$/);
  await waitFor(() => ctx.stats.snapshot().openStreams === 0, 3000, 'stream closed in stats');
  assert.ok(ctx.stats.snapshot().bytesFromClients >= 4);
});

test('CONNECT by IPv4 and IPv6 address reaches the opener typed and canonical', async () => {
  for (const [request, want] of [
    [b(5, 1, 0, 1, 10, 9, 8, 7, 0, 99), { host: '10.9.8.7', port: 99, type: 'ipv4' }],
    [b(5, 1, 0, 4, 0xfd, 0, ...new Array(13).fill(0), 5, 1, 0), { host: 'fd00::5', port: 256, type: 'ipv6' }],
  ] as const) {
    const before = opener.requests.length;
    const { reader, reply } = await socks5(request);
    assert.equal(reply[1], 0);
    assert.deepEqual(opener.requests[before]?.destination, want);
    reader.socket.end('x');
    assert.equal((await reader.rest()).toString(), 'x');
  }
});

test('bytes pipelined with the request are delivered upstream first', async () => {
  const s = await connectClient(port);
  const reader = new Reader(s);
  // Greeting, request and payload in one segment, before any reply.
  s.write(Buffer.concat([b(5, 1, 0), domainRequest('echo.test', 7), Buffer.from('early bytes|')]));
  assert.deepEqual(await reader.read(2), b(5, 0));
  assert.equal((await reader.read(10))[1], 0);
  s.end('late bytes');
  assert.equal((await reader.rest()).toString(), 'early bytes|late bytes');
});

test('no acceptable method: 0xFF then close', async () => {
  const s = await connectClient(port);
  const reader = new Reader(s);
  s.write(b(5, 2, 0x01, 0x02));
  assert.deepEqual(await reader.rest(), b(5, 0xff));
  await assertServesNormally();
});

test('every error class maps to its SOCKS5 reply code', async () => {
  const want: Record<string, number> = {
    'not-allowed.test': 0x02,
    'unknown.test': 0x04,
    'not-ready.test': 0x04,
    'external.test': 0x04,
    'refused.test': 0x05,
    'timeout.test': 0x06,
    'api.test': 0x01,
    'busy.test': 0x01,
    'bug.test': 0x01,
  };
  for (const [host, code] of Object.entries(want)) {
    const { reader, reply } = await socks5(domainRequest(host, 80));
    assert.equal(reply[1], code, host);
    assert.equal((await reader.rest()).length, 0, `${host}: closed after the reply`);
  }
  const { failuresByReason } = ctx.stats.snapshot();
  assert.ok((failuresByReason['connection-refused'] ?? 0) >= 1);
});

test('BIND and UDP ASSOCIATE get 0x07, unknown ATYP 0x08', async () => {
  for (const [request, code] of [
    [domainRequest('echo.test', 7, 2), 0x07],
    [domainRequest('echo.test', 7, 3), 0x07],
    [b(5, 1, 0, 9, 1, 2, 3, 4, 0, 80), 0x08],
  ] as const) {
    const s = await connectClient(port);
    const reader = new Reader(s);
    s.write(Buffer.concat([b(5, 1, 0), request]));
    assert.deepEqual(await reader.read(2), b(5, 0));
    const reply = await reader.rest();
    assert.equal(reply[1], code);
  }
  await assertServesNormally();
});

test('malformed names are refused with a reply, never a crash', async () => {
  for (const [name, code] of [
    [Buffer.alloc(0), 0x01],
    [Buffer.from('a\0b'), 0x04],
    [Buffer.from('sp ace'), 0x04],
    [b(0xc3, 0xa9), 0x04],
  ] as const) {
    const s = await connectClient(port);
    const reader = new Reader(s);
    s.write(Buffer.concat([b(5, 1, 0, 5, 1, 0, 3, name.length), name, b(0, 80)]));
    const out = await reader.rest();
    assert.deepEqual(out.subarray(0, 2), b(5, 0));
    assert.equal(out[3], code);
  }
  await assertServesNormally();
});

test('a version byte other than 5 after the greeting closes without a reply', async () => {
  const s = await connectClient(port);
  const reader = new Reader(s);
  s.write(b(5, 1, 0, 4, 1, 0, 1, 1, 2, 3, 4, 0, 80));
  assert.deepEqual(await reader.rest(), b(5, 0));
  await assertServesNormally();
});

test('socks-proxy-agent (socks5h) drives http.get through the listener', async () => {
  const agent = new SocksProxyAgent(`socks5h://${LOOPBACK}:${port}`);
  for (const path of ['/one', '/two']) {
    const body = await new Promise<string>((resolve, reject) => {
      http
        .get({ host: 'web.test', port: 80, path, agent }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve(text));
        })
        .on('error', reject);
    });
    assert.equal(body, `hello from ${path}`);
  }
  const last = opener.requests.at(-1);
  assert.deepEqual(last?.destination, { host: 'web.test', port: 80, type: 'domain' });
});

test('an HTTP request on the SOCKS port (http_proxy set to it) is told so in HTTP, and logged', async () => {
  const failedBefore = ctx.stats.snapshot().failuresByReason['bad-request'] ?? 0;
  for (const request of ['GET http://web.test/ HTTP/1.1\r\nHost: web.test\r\n\r\n', 'CONNECT web.test:443 HTTP/1.1\r\n\r\n']) {
    const s = await connectClient(port);
    s.write(request);
    const answer = (await new Reader(s).rest()).toString('latin1');
    s.destroy();
    // Its status line says so too: kubectl and other Go programs show nothing else.
    assert.match(answer, /^HTTP\/1\.1 400 Bad Request \(kubectl-proxyout: an HTTP request reached the SOCKS listener: [^\r\n]*\)\r\n[^]*Connection: close\r\n/);
    assert.match(answer, new RegExp(`kubectl-proxyout: an HTTP request reached the SOCKS listener: use socks5h://127\\.0\\.0\\.1:${port} as the proxy`));
  }
  assert.equal(ctx.stats.snapshot().failuresByReason['bad-request'], failedBefore + 2, 'each is a failure in the log and the counts');
  await assertServesNormally();
});

test('a TLS client on the SOCKS port (https:// given for it) is a failure the log explains, not a silent drop', async () => {
  const before = ctx.stats.snapshot();
  const s = await connectClient(port);
  s.end(Buffer.from('\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03', 'latin1'));
  await new Reader(s).rest();
  const after = ctx.stats.snapshot();
  assert.equal(after.failuresByReason['bad-request'], (before.failuresByReason['bad-request'] ?? 0) + 1);
  assert.equal(after.lastFailure?.message, `a TLS client reached the SOCKS listener: use socks5h://127.0.0.1:${port} as the proxy URL, not https://`);
  await assertServesNormally();
});

test('garbage on the port is dropped and the listener keeps serving', async () => {
  for (const junk of ['\x16\x03\x01\x02\x00', '\x05\x01', '\x04\x01\x00\x50', '\x00junk']) {
    const s = await connectClient(port);
    s.end(Buffer.from(junk, 'latin1'));
    await new Reader(s).rest();
  }
  await assertServesNormally();
});
