// Request smuggling through the absolute-form forwarder: a client's `Connection` header may name
// fields, and those are hop-by-hop (RFC 9110 §7.6.1) — but never the fields that frame the
// message. If `Connection: Content-Length` dropped the length, a GET body would reach the origin
// unframed and be read there as a second request.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { endToEndHeaders } from '../../src/listeners/http-messages.js';
import { FakeOpener, LOOPBACK, quietContext, tcpStream } from './socks-fixtures.test.js';

interface Seen {
  method: string;
  url: string;
  bodyLength: number;
  headers: http.IncomingHttpHeaders;
}
const seen: Seen[] = [];
const origin = http.createServer((req, res) => {
  let bodyLength = 0;
  req.on('data', (c: Buffer) => (bodyLength += c.length));
  req.on('end', () => {
    seen.push({ method: req.method!, url: req.url!, bodyLength, headers: req.headers });
    res.end(`${req.method} ${req.url} ${bodyLength}`);
  });
});
origin.listen(0, LOOPBACK);
await once(origin, 'listening');
const ctx = quietContext(new FakeOpener({}, () => tcpStream((origin.address() as net.AddressInfo).port)));
const listener = await startHttpListener(LOOPBACK, 0, ctx);
after(async () => {
  await listener.close(0);
  origin.close();
});

/** Writes raw bytes to the proxy and reads until it closes or `count` responses have arrived. */
async function raw(bytes: string, count: number): Promise<string> {
  const s = net.connect({ host: LOOPBACK, port: listener.address.port });
  s.on('error', () => {});
  await once(s, 'connect');
  s.write(bytes);
  let text = '';
  s.setEncoding('latin1');
  await new Promise<void>((resolve) => {
    s.on('data', (c: string) => {
      text += c;
      if ((text.match(/HTTP\/1\.1 \d{3}/g) ?? []).length >= count && /\r\n\r\n[^]*$/.test(text)) resolve();
    });
    s.on('close', () => resolve());
    setTimeout(resolve, 3000).unref();
  });
  s.destroy();
  return text;
}

const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: web.test\r\n\r\n';

for (const method of ['GET', 'DELETE', 'OPTIONS', 'POST']) {
  for (const named of ['Content-Length', 'content-length, keep-alive', 'Transfer-Encoding', 'Host']) {
    test(`${method} with "Connection: ${named}" and a body: the origin sees exactly one request, framed`, async () => {
      seen.length = 0;
      const head = `${method} http://web.test/one HTTP/1.1\r\nHost: web.test\r\nConnection: ${named}\r\nContent-Length: ${smuggled.length}\r\n\r\n`;
      const answer = await raw(head + smuggled, 1);
      assert.match(answer, new RegExp(`^HTTP/1\\.1 200 [^]*${method} /one ${smuggled.length}$`));
      // A second, ordinary request: by the time it is answered, a smuggled one would have been read.
      const marker = await raw('GET http://web.test/marker HTTP/1.1\r\nHost: web.test\r\n\r\n', 1);
      assert.match(marker, /GET \/marker 0$/);
      assert.deepEqual(
        seen.map((s) => s.url),
        ['/one', '/marker'],
        'no smuggled request reached the origin',
      );
      assert.equal(seen[0]!.bodyLength, smuggled.length);
      assert.equal(seen[0]!.headers.host, 'web.test');
    });
  }
}

test('chunked body with "Connection: Transfer-Encoding" is re-framed, not passed raw', async () => {
  seen.length = 0;
  const body = `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`;
  const answer = await raw(
    `OPTIONS http://web.test/chunked HTTP/1.1\r\nHost: web.test\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n${body}`,
    1,
  );
  assert.match(answer, new RegExp(`OPTIONS /chunked ${smuggled.length}$`));
  await raw('GET http://web.test/marker HTTP/1.1\r\nHost: web.test\r\n\r\n', 1);
  assert.deepEqual(
    seen.map((s) => s.url),
    ['/chunked', '/marker'],
  );
});

test('endToEndHeaders: Connection cannot name the framing fields or Host', () => {
  const rawHeaders = ['Host', 'a', 'Content-Length', '5', 'Connection', 'Content-Length, Transfer-Encoding, Host, X-A', 'X-A', '1', 'X-B', '2'];
  assert.deepEqual(endToEndHeaders(rawHeaders), ['Host', 'a', 'Content-Length', '5', 'X-B', '2']);
});

test('a chunked body with a bad chunk size after its head went on: the client gets 400, the origin no complete request', async () => {
  seen.length = 0;
  const head = 'POST http://web.test/upload HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: chunked\r\n\r\n';
  const answer = await raw(`${head}5\r\nhello\r\nzz\r\n${smuggled}`, 1);
  assert.match(answer, /^HTTP\/1\.1 400 [^]*kubectl-proxyout: malformed HTTP request/);
  const marker = await raw('GET http://web.test/marker HTTP/1.1\r\nHost: web.test\r\n\r\n', 1);
  assert.match(marker, /GET \/marker 0$/);
  assert.deepEqual(
    seen.map((s) => s.url),
    ['/marker'],
    'neither the cut upload nor what followed it reached the origin as a request',
  );
});

test('an HTTP/1.0 request with Transfer-Encoding gets 400 and a close; nothing behind it is acted on', async () => {
  seen.length = 0;
  const body = `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`;
  const head = 'POST http://web.test/old HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n';
  const answer = await raw(`${head}${body}GET http://web.test/behind HTTP/1.0\r\nConnection: keep-alive\r\n\r\n`, 2);
  assert.match(answer, /^HTTP\/1\.1 400 [^]*Connection: close\r\n[^]*HTTP\/1\.0 request cannot carry Transfer-Encoding/);
  assert.equal((answer.match(/HTTP\/1\.1 \d{3}/g) ?? []).length, 1, 'one answer, then the close');
  await raw('GET http://web.test/marker HTTP/1.1\r\nHost: web.test\r\n\r\n', 1);
  assert.deepEqual(
    seen.map((s) => s.url),
    ['/marker'],
  );
});
