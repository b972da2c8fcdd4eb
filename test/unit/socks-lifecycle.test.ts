import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import { HostUnreachableError, StartupError } from '../../src/core/errors.js';
import type { OpenRequest } from '../../src/core/types.js';
import { startSocksListener } from '../../src/listeners/socks-server.js';
import { FakeOpener, LOOPBACK, Reader, connectClient, delay, quietContext, startEcho, tcpStream, waitFor } from './socks-fixtures.test.js';

const b = (...bytes: number[]): Buffer => Buffer.from(bytes);
const HANDSHAKE_MS = 300;

const echo = await startEcho();
let slowRequest: OpenRequest | undefined;
let releaseLate: (() => void) | undefined;
const lateStream = new PassThrough();
const opener = new FakeOpener(
  {
    // Never resolves on its own; rejects when the client goes away (as the core must).
    'slow.test': (req) => {
      slowRequest = req;
      return new Promise((_resolve, reject) => req.signal.addEventListener('abort', () => reject(req.signal.reason)));
    },
    // Ignores the signal and hands out a stream after the client is gone.
    'late.test': () => new Promise((resolve) => (releaseLate = () => resolve({ stream: lateStream, via: 'late' }))),
    'unknown.test': () => Promise.reject(new HostUnreachableError('no such service')),
  },
  () => tcpStream(echo.port),
);
const ctx = quietContext(opener, HANDSHAKE_MS);
const listener = await startSocksListener(LOOPBACK, 0, ctx);
const port = listener.address.port;

after(async () => {
  await listener.close(50);
  echo.close();
});

function socks4(host: string | [number, number, number, number], dport: number, cd = 1, user = 'u'): Buffer {
  const ip = typeof host === 'string' ? [0, 0, 0, 1] : host;
  const tail = typeof host === 'string' ? Buffer.from(`${host}\0`) : Buffer.alloc(0);
  return Buffer.concat([b(4, cd, dport >> 8, dport & 0xff, ...ip), Buffer.from(`${user}\0`), tail]);
}

async function assertServesNormally(): Promise<void> {
  const s = await connectClient(port);
  const reader = new Reader(s);
  s.write(socks4([10, 0, 0, 1], 7));
  assert.deepEqual(await reader.read(8), b(0, 0x5a, 0, 0, 0, 0, 0, 0));
  s.end('ok');
  assert.equal((await reader.rest()).toString(), 'ok');
}

test('SOCKS4 CONNECT by IP, with pipelined bytes', async () => {
  const s = await connectClient(port);
  const reader = new Reader(s);
  s.write(Buffer.concat([socks4([10, 1, 2, 3], 8080, 1, 'alice'), Buffer.from('early|')]));
  assert.deepEqual(await reader.read(8), b(0, 0x5a, 0, 0, 0, 0, 0, 0));
  s.end('late');
  assert.equal((await reader.rest()).toString(), 'early|late');
  const req = opener.requests.find((r) => r.destination.host === '10.1.2.3');
  assert.deepEqual(req?.destination, { host: '10.1.2.3', port: 8080, type: 'ipv4' });
  assert.equal(req?.frontEnd, 'socks4');
});

test('SOCKS4A CONNECT by name', async () => {
  const s = await connectClient(port);
  const reader = new Reader(s);
  s.write(socks4('db.test', 5432));
  assert.deepEqual(await reader.read(8), b(0, 0x5a, 0, 0, 0, 0, 0, 0));
  s.end('x');
  assert.equal((await reader.rest()).toString(), 'x');
  assert.deepEqual(opener.requests.at(-1)?.destination, { host: 'db.test', port: 5432, type: 'domain' });
});

test('SOCKS4 BIND, failures and bad requests get 0x5B', async () => {
  for (const request of [
    socks4([10, 0, 0, 1], 21, 2),
    socks4('unknown.test', 80),
    socks4([0, 0, 0, 0], 80),
    Buffer.concat([b(4, 1, 0, 80, 1, 2, 3, 4), Buffer.alloc(400, 0x41)]),
  ]) {
    const s = await connectClient(port);
    const reader = new Reader(s);
    s.write(request);
    assert.deepEqual(await reader.rest(), b(0, 0x5b, 0, 0, 0, 0, 0, 0));
  }
  await assertServesNormally();
});

test('a silent client is dropped after the handshake timeout', async () => {
  const s = await connectClient(port);
  const started = Date.now();
  await new Reader(s).rest(HANDSHAKE_MS * 10);
  const elapsed = Date.now() - started;
  assert.ok(elapsed >= HANDSHAKE_MS - 50 && elapsed < HANDSHAKE_MS * 5, `dropped after ${elapsed} ms`);
  await assertServesNormally();
});

test('a client dribbling its greeting byte by byte is dropped too', async () => {
  const s = await connectClient(port);
  const reader = new Reader(s);
  const started = Date.now();
  // A domain request of 255 bytes, one byte every 20 ms, would take over 5 s.
  const request = Buffer.concat([b(5, 1, 0, 5, 1, 0, 3, 255), Buffer.alloc(255, 0x61), b(0, 80)]);
  for (const byte of request) {
    if (reader.isEnded || s.destroyed) break;
    s.write(b(byte));
    await delay(20);
  }
  await reader.rest(HANDSHAKE_MS * 10);
  assert.ok(Date.now() - started < HANDSHAKE_MS * 5);
});

test('client disconnect during a slow open aborts it', async () => {
  const s = await connectClient(port);
  s.write(Buffer.concat([b(5, 1, 0, 5, 1, 0, 3, 9), Buffer.from('slow.test'), b(0, 80)]));
  await waitFor(() => slowRequest !== undefined, 2000, 'open() called');
  assert.equal(slowRequest!.signal.aborted, false);
  s.destroy();
  await waitFor(() => slowRequest!.signal.aborted, 2000, 'signal aborted');
  await waitFor(() => listener.connections() === 0, 2000, 'connection released');
  await assertServesNormally();
});

test('a stream that arrives after the client left is destroyed', async () => {
  const s = await connectClient(port);
  s.write(Buffer.concat([b(5, 1, 0, 5, 1, 0, 3, 9), Buffer.from('late.test'), b(0, 80)]));
  await waitFor(() => releaseLate !== undefined, 2000, 'open() called');
  s.destroy();
  await waitFor(() => opener.requests.at(-1)?.signal.aborted === true, 2000, 'signal aborted');
  releaseLate!();
  await waitFor(() => lateStream.destroyed, 2000, 'late stream destroyed');
});

test('close(grace): stops accepting at once, waits, then cuts open tunnels', async () => {
  const l = await startSocksListener(LOOPBACK, 0, ctx);
  const s = await connectClient(l.address.port);
  const reader = new Reader(s);
  s.write(socks4([10, 0, 0, 2], 7));
  await reader.read(8);
  assert.equal(l.connections(), 1);
  const started = Date.now();
  const closing = l.close(300);
  // New connections are refused while the old one is still served.
  const refused = net.connect({ host: LOOPBACK, port: l.address.port });
  const [err] = (await once(refused, 'error')) as [NodeJS.ErrnoException];
  assert.equal(err.code, 'ECONNREFUSED');
  s.write('still works');
  assert.equal((await reader.read(11)).toString(), 'still works');
  await closing;
  assert.ok(Date.now() - started >= 250);
  await reader.rest();
  assert.equal(l.connections(), 0);
});

test('close(grace) returns early when clients finish', async () => {
  const l = await startSocksListener(LOOPBACK, 0, ctx);
  const s = await connectClient(l.address.port);
  const reader = new Reader(s);
  s.write(socks4([10, 0, 0, 3], 7));
  await reader.read(8);
  const started = Date.now();
  const closing = l.close(5000);
  s.end();
  await reader.rest();
  await closing;
  assert.ok(Date.now() - started < 2000);
});

test('a port in use rejects start with a clear message naming the address', async () => {
  await assert.rejects(startSocksListener(LOOPBACK, port, ctx), (err: Error) => {
    assert.ok(err instanceof StartupError);
    assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${port}.*already in use`));
    return true;
  });
});
