// Trailer fields through the absolute-form forwarder (RFC 9110 §6.5): a chunked body's trailer
// section goes on to the other side, both ways, less the fields that frame, route or describe
// the content; a client that cannot take trailers (HTTP/1.0) gets the body without them.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { forwardableTrailers } from '../../src/listeners/http-messages.js';
import { FakeOpener, LOOPBACK, quietContext, tcpStream } from './socks-fixtures.test.js';

const run = promisify(execFile);
const received: { body: string; trailers: string[] }[] = [];
const origin = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (body += c));
  req.on('end', () => {
    received.push({ body, trailers: req.rawTrailers });
    res.writeHead(200, { 'Content-Type': 'text/plain', Trailer: 'X-Checksum' });
    res.write('part one,');
    res.addTrailers([
      ['X-Checksum', 'sha256=abc'],
      ['Content-Type', 'text/html'],
    ]);
    res.end('part two');
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

/** Writes raw bytes to the proxy and reads until it closes or the answer's last chunk came. */
async function raw(bytes: string): Promise<string> {
  const s = net.connect({ host: LOOPBACK, port: listener.address.port });
  s.on('error', () => {});
  await once(s, 'connect');
  s.write(bytes);
  let text = '';
  s.setEncoding('latin1');
  await new Promise<void>((resolve) => {
    s.on('data', (c: string) => {
      text += c;
      if (/\r\n0\r\n[^]*\r\n\r\n$/.test(text)) resolve();
    });
    s.on('close', () => resolve());
    setTimeout(resolve, 3000).unref();
  });
  s.destroy();
  return text;
}

test("a chunked request's trailer fields reach the origin; framing and routing ones do not", async () => {
  received.length = 0;
  await raw(
    'POST http://web.test/up HTTP/1.1\r\nHost: web.test\r\nTransfer-Encoding: chunked\r\nTrailer: X-Digest\r\n\r\n' +
      '5\r\nhello\r\n0\r\nX-Digest: sha-256=xyz\r\nHost: elsewhere.test\r\nConnection: x\r\n\r\n',
  );
  assert.equal(received.length, 1);
  assert.equal(received[0]!.body, 'hello');
  assert.deepEqual(received[0]!.trailers, ['X-Digest', 'sha-256=xyz']);
});

test("the origin's trailer fields reach an HTTP/1.1 client (curl), not an HTTP/1.0 one", async () => {
  const { stdout } = await run('curl', ['-sS', '-i', '--raw', '-x', `http://${LOOPBACK}:${listener.address.port}`, 'http://web.test/down']);
  assert.match(stdout, /part one,[^]*part two/);
  assert.match(stdout, /\r\n0\r\nX-Checksum: sha256=abc\r\n\r\n$/, 'the trailer section came after the last chunk');
  assert.doesNotMatch(stdout, /text\/html/, 'Content-Type is never taken from trailers');
  const old = await raw('GET http://web.test/down HTTP/1.0\r\n\r\n');
  assert.match(old, /\r\n\r\npart one,part two$/);
});

test('forwardableTrailers drops hop-by-hop, framing and content fields', () => {
  assert.deepEqual(
    forwardableTrailers(['X-A', '1', 'Content-Length', '5', 'Host', 'h', 'Connection', 'X-B', 'X-B', '2', 'Set-Cookie', 'c', 'Server-Timing', 'db;dur=5']),
    [
      ['X-A', '1'],
      ['Server-Timing', 'db;dur=5'],
    ],
  );
});
