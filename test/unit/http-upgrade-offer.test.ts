// An Upgrade header on an absolute-form request is an offer the proxy may decline (RFC 9110
// §7.8): `curl --http2` (and git with http.version=HTTP/2) offers h2c on every http:// URL and
// must get the page over HTTP/1.1, not a refusal. WebSocket, which only works through a tunnel,
// still gets 501 with the hint to use CONNECT.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, Reader, connectClient, quietContext, tcpStream } from './socks-fixtures.test.js';

const run = promisify(execFile);

/** An HTTP/1.1 origin that echoes what it received, and never upgrades. */
const origin = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => res.end(JSON.stringify({ method: req.method, headers: req.headers, body })));
});
origin.listen(0, LOOPBACK);
await once(origin, 'listening');
const opener = new FakeOpener({ 'web.test': () => tcpStream((origin.address() as AddressInfo).port) });
const ctx = quietContext(opener);
const listener = await startHttpListener(LOOPBACK, 0, ctx);
const proxy = `http://${LOOPBACK}:${listener.address.port}`;

after(async () => {
  await listener.close(100);
  origin.close();
});

interface Echoed {
  method: string;
  headers: Record<string, string>;
  body: string;
}

test('curl --http2 on an http:// URL (an h2c upgrade offer) gets the page over HTTP/1.1, the offer not passed on', async () => {
  const { stdout, stderr } = await run('/usr/bin/curl', ['-sS', '-v', '--max-time', '10', '--http2', '-x', proxy, 'http://web.test/page'], {
    env: { PATH: '/usr/bin:/bin' },
  });
  assert.match(stderr, /> Upgrade: h2c/, 'curl offered h2c');
  assert.match(stderr, /< HTTP\/1\.1 200 /);
  const got = JSON.parse(stdout) as Echoed;
  assert.equal(got.method, 'GET');
  for (const h of ['upgrade', 'http2-settings']) assert.equal(got.headers[h], undefined, `${h} is hop-by-hop here`);
});

test('an h2c offer on a POST: the body goes on and the answer comes back on a connection that stays open', async () => {
  const s = await connectClient(listener.address.port);
  const reader = new Reader(s);
  s.write(
    'POST http://web.test/form HTTP/1.1\r\nHost: web.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nContent-Length: 5\r\n\r\nhello',
  );
  let head = '';
  while (!head.endsWith('\r\n\r\n')) head += (await reader.read(1)).toString();
  assert.match(head, /^HTTP\/1\.1 200 /);
  assert.match(head, /\r\nConnection: keep-alive\r\n/);
  const length = Number(/\r\nContent-Length: (\d+)\r\n/i.exec(head)?.[1]);
  const got = JSON.parse((await reader.read(length)).toString()) as Echoed;
  assert.equal(got.headers.upgrade, undefined);
  assert.equal(got.body, 'hello');
  s.destroy();
});

test('a WebSocket upgrade still gets 501 naming CONNECT', async () => {
  const s = await connectClient(listener.address.port);
  const reader = new Reader(s);
  s.write(
    'GET http://web.test/ws HTTP/1.1\r\nHost: web.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
  );
  const out = (await reader.rest()).toString();
  assert.match(out, /^HTTP\/1\.1 501 /);
  assert.match(out, /CONNECT/);
});
