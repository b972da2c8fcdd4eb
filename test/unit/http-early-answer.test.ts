// An origin that answers an upload before reading all of it, then closes (nginx's 413 for a body
// over client_max_body_size): the client's answer and its connection must survive that.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net, { type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, quietContext, tcpStream } from './socks-fixtures.test.js';

/** Answers 413 and closes as soon as a request head is in, whatever body follows. */
const early = net.createServer((sock) => {
  sock.on('error', () => undefined);
  let seen = '';
  sock.on('data', (c: Buffer) => {
    seen += c.toString('latin1');
    if (!seen.includes('\r\n\r\n')) return;
    sock.removeAllListeners('data');
    sock.end('HTTP/1.1 413 Payload Too Large\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large');
    sock.resume();
    setTimeout(() => sock.destroy(), 50);
  });
});
early.listen(0, LOOPBACK);
await once(early, 'listening');
/** Answers every request `fine`. */
const fine = net.createServer((sock) => {
  sock.on('error', () => undefined);
  sock.on('data', () => sock.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nfine'));
});
fine.listen(0, LOOPBACK);
await once(fine, 'listening');

const opener = new FakeOpener({
  'early.test': () => tcpStream((early.address() as AddressInfo).port),
  'fine.test': () => tcpStream((fine.address() as AddressInfo).port),
});
const listener = await startHttpListener(LOOPBACK, 0, quietContext(opener));

after(async () => {
  await listener.close(100);
  early.close();
  fine.close();
});

test('an upload the origin answered early and closed on: the rest is read and dropped, and the connection goes on', async () => {
  const body = Buffer.alloc(16 * 1024 * 1024, 1);
  const s = net.connect({ host: LOOPBACK, port: listener.address.port });
  s.on('error', () => undefined);
  await once(s, 'connect');
  // As Python's http.client: the whole body is sent before a byte of the answer is read.
  s.pause();
  s.write(`POST http://early.test/up HTTP/1.1\r\nHost: early.test\r\nContent-Length: ${body.length}\r\n\r\n`);
  const sent = new Promise<void>((resolve) => s.write(body, () => resolve()));
  const timeout = new Promise<string>((resolve) => setTimeout(() => resolve('timeout'), 5000).unref());
  assert.notEqual(await Promise.race([sent.then(() => 'sent'), timeout]), 'timeout', 'the whole body could be sent');
  let response = '';
  s.on('data', (c: Buffer) => (response += c.toString('latin1')));
  s.resume();
  s.write('GET http://fine.test/ HTTP/1.1\r\nHost: fine.test\r\n\r\n');
  for (let i = 0; i < 150 && !response.endsWith('fine'); i++) await new Promise((r) => setTimeout(r, 20));
  s.destroy();
  assert.match(response, /^HTTP\/1\.1 413 [^]*too large[^]*HTTP\/1\.1 200 OK[^]*fine$/);
});
