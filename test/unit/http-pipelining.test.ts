// A GET and a CONNECT pipelined on one connection, in one write: the answers come in request
// order (RFC 9112 §9.3.2) — the GET's whole response, then the CONNECT's 200 (or 407) — even
// though Node hands the CONNECT to us while the GET's response is still on its way.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { ProxyAuth } from '../../src/auth/credentials.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import type { Listener } from '../../src/listeners/listener.js';
import { FakeOpener, LOOPBACK, quietContext, startEcho, tcpStream } from './socks-fixtures.test.js';

// The GET's origin answers late, so that the CONNECT is parsed long before.
const origin = http.createServer((_req, res) => setTimeout(() => res.end('slow-body'), 300));
origin.listen(0, LOOPBACK);
await once(origin, 'listening');
const echo = await startEcho();
const opener = new FakeOpener({
  'web.test': () => tcpStream((origin.address() as net.AddressInfo).port),
  'echo.test': () => tcpStream(echo.port),
});
const listeners: Listener[] = [];
after(async () => {
  for (const l of listeners) await l.close(0);
  origin.close();
  echo.close();
});

const basic = `Basic ${Buffer.from('alice:pw').toString('base64')}`;

/** Writes both requests in one write; collects everything until `done(text)` or the proxy closes. */
async function pipelined(port: number, bytes: string, done: (text: string) => boolean, then?: (s: net.Socket) => void): Promise<string> {
  const s = net.connect({ host: LOOPBACK, port });
  s.on('error', () => {});
  await once(s, 'connect');
  s.write(bytes);
  let text = '';
  let sent = false;
  await new Promise<void>((resolve) => {
    s.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      if (!sent && then && text.includes('Connection established\r\n\r\n')) {
        sent = true;
        then(s);
      }
      if (done(text)) resolve();
    });
    s.on('close', () => resolve());
    setTimeout(resolve, 5000).unref();
  });
  s.destroy();
  return text;
}

test('GET then CONNECT in one write: the GET is answered in full first, then 200 Connection established', async () => {
  const listener = await startHttpListener(LOOPBACK, 0, quietContext(opener));
  listeners.push(listener);
  const text = await pipelined(
    listener.address.port,
    'GET http://web.test/ HTTP/1.1\r\nHost: web.test\r\n\r\nCONNECT echo.test:7 HTTP/1.1\r\nHost: echo.test:7\r\n\r\n',
    (t) => t.endsWith('ping'),
    (s) => s.write('ping'),
  );
  assert.match(text, /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nslow-body(HTTP\/1\.1 200 Connection established\r\n\r\n)ping$/);
});

test("with authentication: the CONNECT's 407 does not drop the earlier GET's answer", async () => {
  const ctx = quietContext(opener);
  ctx.auth = new ProxyAuth({ username: 'alice', password: 'pw' });
  const listener = await startHttpListener(LOOPBACK, 0, ctx);
  listeners.push(listener);
  const text = await pipelined(
    listener.address.port,
    `GET http://web.test/ HTTP/1.1\r\nHost: web.test\r\nProxy-Authorization: ${basic}\r\n\r\nCONNECT echo.test:7 HTTP/1.1\r\nHost: echo.test:7\r\n\r\n`,
    (t) => /407[^]*\r\n\r\n[^]*\n$/.test(t),
  );
  assert.match(text, /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nslow-body(HTTP\/1\.1 407 Proxy Authentication Required\r\n)/);
});

test('two GETs then CONNECT in one write: both answers, in order, before the tunnel', async () => {
  const listener = await startHttpListener(LOOPBACK, 0, quietContext(opener));
  listeners.push(listener);
  const get = 'GET http://web.test/ HTTP/1.1\r\nHost: web.test\r\n\r\n';
  const text = await pipelined(
    listener.address.port,
    `${get}${get}CONNECT echo.test:7 HTTP/1.1\r\nHost: echo.test:7\r\n\r\n`,
    (t) => t.endsWith('ping'),
    (s) => s.write('ping'),
  );
  assert.match(text, /^HTTP\/1\.1 200 OK\r\n[^]*slow-bodyHTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nslow-bodyHTTP\/1\.1 200 Connection established\r\n\r\nping$/);
});

test('a request pipelined behind a 407 that closes the connection is not sent on, even with the right credentials', async () => {
  const seen: string[] = [];
  const recording = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    req.on('end', () => res.end('done\n'));
  });
  recording.listen(0, LOOPBACK);
  await once(recording, 'listening');
  const ctx = quietContext(new FakeOpener({ 'bank.test': () => tcpStream((recording.address() as net.AddressInfo).port) }));
  ctx.auth = new ProxyAuth({ username: 'alice', password: 'pw' });
  const listener = await startHttpListener(LOOPBACK, 0, ctx);
  listeners.push(listener);
  try {
    // The first request has no credentials: 407 and close (the connection never authenticated).
    const text = await pipelined(
      listener.address.port,
      'GET http://bank.test/first HTTP/1.1\r\nHost: bank.test\r\n\r\n' +
        `POST http://bank.test/transfer HTTP/1.1\r\nHost: bank.test\r\nProxy-Authorization: ${basic}\r\nContent-Length: 2\r\n\r\nhi`,
      (t) => /407[^]*\r\n\r\n[^]*\n$/.test(t),
    );
    await new Promise((r) => setTimeout(r, 300)); // time for a request sent on to reach the origin
    assert.match(text, /^HTTP\/1\.1 407 Proxy Authentication Required\r\n[^]*Connection: close\r\n/);
    assert.equal(text.match(/HTTP\/1\.1 \d{3}/g)?.length, 1, text);
    assert.deepEqual(seen, [], 'the origin got no request');
  } finally {
    recording.close();
  }
});
