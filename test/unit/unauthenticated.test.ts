// Unauthenticated clients on an auth-protected port: a connection that never authenticated is
// closed after its 407, and each source (all of loopback is one) may hold at most 64 connections
// that have not authenticated — one more evicts the oldest, so a hoarder cannot lock out the owner;
// but not before it had a second to authenticate, so a parallel client's burst gets in whole.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ProxyAuth } from '../../src/auth/credentials.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { startSocksListener } from '../../src/listeners/socks-server.js';
import { EVICTION_GRACE_MS, MAX_UNAUTHENTICATED_PER_SOURCE } from '../../src/listeners/unauthenticated.js';
import type { Listener } from '../../src/listeners/listener.js';
import { FakeOpener, Reader, quietContext, tcpStream, waitFor } from './socks-fixtures.test.js';

const origin = http.createServer((_req, res) => res.end('ok'));
origin.listen(0, '127.0.0.1');
await once(origin, 'listening');
// Idle connections must outlive the test: a long head deadline.
const ctx = quietContext(new FakeOpener({}, () => tcpStream((origin.address() as net.AddressInfo).port)), 60_000);
ctx.auth = new ProxyAuth({ username: 'alice', password: 'pw' });
const httpL = await startHttpListener('127.0.0.1', 0, ctx);
const socksL = await startSocksListener('127.0.0.1', 0, ctx);
const listeners: Listener[] = [httpL, socksL];
after(async () => {
  for (const l of listeners) await l.close(0);
  origin.close();
});

const run = promisify(execFile);
const basic = `Basic ${Buffer.from('alice:pw').toString('base64')}`;
const get = (auth?: string) => `GET http://web.test/ HTTP/1.1\r\nHost: web.test\r\n${auth ? `Proxy-Authorization: ${auth}\r\n` : ''}\r\n`;

async function open(port: number, localAddress: string): Promise<{ socket: net.Socket; closed: () => boolean; reader: Reader }> {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress });
  socket.on('error', () => {});
  let closed = false;
  socket.once('close', () => (closed = true));
  await once(socket, 'connect');
  return { socket, closed: () => closed, reader: new Reader(socket) };
}

/** Reads one complete response with a Content-Length body. */
async function response(reader: Reader): Promise<string> {
  let text = '';
  for (;;) {
    text += (await reader.read(1)).toString('latin1');
    const end = text.indexOf('\r\n\r\n');
    if (end >= 0 && text.length === end + 4 + Number(/content-length: (\d+)/i.exec(text)?.[1] ?? 0)) return text;
  }
}

test('a 407 on a connection that never authenticated closes it; on an authenticated one it keeps the connection', async () => {
  const c = await open(httpL.address.port, '127.0.0.1');
  c.socket.write(get());
  const denied = await response(c.reader);
  assert.match(denied, /^HTTP\/1\.1 407 [^]*\r\nConnection: close\r\n/i);
  await waitFor(c.closed, 3000, 'the proxy closed the unauthenticated connection');

  const k = await open(httpL.address.port, '127.0.0.1');
  k.socket.write(get(basic));
  assert.match(await response(k.reader), /^HTTP\/1\.1 200 /);
  k.socket.write(get());
  const later = await response(k.reader);
  assert.match(later, /^HTTP\/1\.1 407 /);
  assert.doesNotMatch(later, /Connection: close/i);
  k.socket.write(get(basic));
  assert.match(await response(k.reader), /^HTTP\/1\.1 200 /, 'still usable');
  assert.equal(k.closed(), false);
  k.socket.destroy();
});

for (const [name, listener, authenticate] of [
  [
    'HTTP',
    httpL,
    async (c: Awaited<ReturnType<typeof open>>) => {
      c.socket.write(get(basic));
      assert.match(await response(c.reader), /^HTTP\/1\.1 200 /);
    },
  ],
  [
    'SOCKS5',
    socksL,
    async (c: Awaited<ReturnType<typeof open>>) => {
      c.socket.write(Buffer.from([5, 1, 2, 1, 5, ...Buffer.from('alice'), 2, ...Buffer.from('pw')]));
      assert.deepEqual([...(await c.reader.read(4))], [5, 2, 1, 0]);
    },
  ],
] as const) {
  test(`${name}: at most ${MAX_UNAUTHENTICATED_PER_SOURCE} unauthenticated connections per source; the owner still gets in`, async () => {
    const hoard: Array<Awaited<ReturnType<typeof open>>> = [];
    // Spread over 127.0.0.0/8: it is all one source.
    for (let i = 0; i < MAX_UNAUTHENTICATED_PER_SOURCE; i++) hoard.push(await open(listener.address.port, `127.0.${i % 4}.${2 + i}`));
    // Past their grace: a hoard, not a burst still being read.
    await new Promise((r) => setTimeout(r, EVICTION_GRACE_MS + 50));
    assert.equal(hoard.filter((c) => c.closed()).length, 0, 'up to the limit, nothing is closed');

    const owner = await open(listener.address.port, '127.0.0.1');
    await authenticate(owner);

    for (let i = 0; i < 20; i++) hoard.push(await open(listener.address.port, '127.0.0.9'));
    await waitFor(() => hoard.filter((c) => !c.closed()).length === MAX_UNAUTHENTICATED_PER_SOURCE, 3000, 'the hoard stays at the limit');
    assert.ok(
      hoard.slice(0, 20).every((c) => c.closed()),
      'the oldest were evicted',
    );
    assert.equal(owner.closed(), false, 'an authenticated connection never counts and is never evicted');
    for (const c of [...hoard, owner]) c.socket.destroy();
  });
}

test('curl --parallel through either listener: no connection is cut before it authenticates', async () => {
  // A parallel client (curl -Z, a Go program's workers) opens its connections at once, and the
  // listener accepts many of them before it reads any one's credentials.
  const small = [
    await startHttpListener('127.0.0.1', 0, ctx, { maxUnauthenticatedPerSource: 20 }),
    await startSocksListener('127.0.0.1', 0, ctx, { maxUnauthenticatedPerSource: 20 }),
  ];
  listeners.push(...small);
  for (const [scheme, listener] of [
    ['http', small[0]!],
    ['socks5h', small[1]!],
  ] as const) {
    const args = ['-sS', '-Z', '--parallel-max', '300', '-x', `${scheme}://alice:pw@127.0.0.1:${listener.address.port}`, 'http://web.test/[1-300]'];
    const { stdout } = await run('/usr/bin/curl', [...args, '-o', '/dev/null', '-w', '%{http_code}\n'], { env: { PATH: '/usr/bin:/bin' } }).catch(
      (err: { stdout: string }) => err,
    );
    const codes = stdout.trim().split('\n');
    assert.equal(codes.filter((c) => c === '200').length, 300, `${scheme}: ${codes.filter((c) => c !== '200').length} of 300 failed`);
  }
});
