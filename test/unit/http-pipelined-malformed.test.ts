// A malformed request pipelined behind a valid one: the valid one's answer comes first and whole,
// then the 400 for the malformed one, then the close (RFC 9112 §9.3.2: answers in request order).
// Before, the 400 overtook the answer still on its way (the client read it as that answer), or cut
// off an answer already being sent.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, Reader, connectClient, delay, quietContext, tcpStream } from './socks-fixtures.test.js';

// /late answers after 200 ms; /stream sends its head and half its body, the rest 300 ms later.
const origin = http.createServer((req, res) => {
  if (req.url === '/late') setTimeout(() => res.end('late answer'), 200);
  else {
    res.writeHead(200, { 'Content-Length': 10 });
    res.write('first');
    setTimeout(() => res.end('-last'), 300);
  }
});
origin.listen(0, LOOPBACK);
await once(origin, 'listening');
const listener = await startHttpListener(
  LOOPBACK,
  0,
  quietContext(new FakeOpener({ 'web.test': () => tcpStream((origin.address() as net.AddressInfo).port) })),
);

after(async () => {
  await listener.close(100);
  origin.closeAllConnections();
  origin.close();
});

const get = (path: string): string => `GET http://web.test${path} HTTP/1.1\r\nHost: web.test\r\n\r\n`;
const MALFORMED = 'BAD\x01 / HTTP/1.1\r\n\r\n';

test('a valid request and a malformed one in one write: its answer, then 400, then close', async () => {
  const s = await connectClient(listener.address.port);
  const reader = new Reader(s);
  s.write(get('/late') + MALFORMED);
  const text = (await reader.rest()).toString('latin1');
  s.destroy();
  assert.match(text, /^HTTP\/1\.1 200 [^]*\r\n\r\nlate answer(HTTP\/1\.1 400 )[^]*malformed HTTP request\n$/);
});

test('a malformed request while an answer is being sent: the answer is sent whole, then 400', async () => {
  const s = await connectClient(listener.address.port);
  const reader = new Reader(s);
  s.write(get('/stream'));
  let text = '';
  while (!text.endsWith('first')) text += (await reader.read(1)).toString('latin1');
  s.write(MALFORMED);
  await delay(50);
  text += (await reader.rest()).toString('latin1');
  s.destroy();
  assert.match(text, /^HTTP\/1\.1 200 [^]*\r\n\r\nfirst-last(HTTP\/1\.1 400 )[^]*malformed HTTP request\n$/);
});
