// An origin that sends a body where none belongs (on a HEAD or a 204), a little after the answer:
// the answer stands, and the next request, which may already be on that pooled tunnel, must not
// be answered with those bytes' parse error.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net, { type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, Reader, connectClient, quietContext, tcpStream } from './socks-fixtures.test.js';

/**
 * One request at a time, in order, as a threaded server's worker: HEAD gets a head with
 * Content-Length 5 and, 100 ms later, the 5 bytes; anything else `ok`.
 */
const origin = net.createServer((sock) => {
  sock.on('error', () => undefined);
  let seen = '';
  let busy = Promise.resolve();
  sock.on('data', (c: Buffer) => {
    seen += c.toString('latin1');
    for (let end = seen.indexOf('\r\n\r\n'); end >= 0; end = seen.indexOf('\r\n\r\n')) {
      const head = seen.slice(0, end);
      seen = seen.slice(end + 4);
      busy = busy.then(async () => {
        if (!head.startsWith('HEAD ')) return void sock.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
        sock.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n');
        await new Promise((resolve) => setTimeout(resolve, 100));
        sock.write('HELLO');
      });
    }
  });
});
origin.listen(0, LOOPBACK);
await once(origin, 'listening');
const opener = new FakeOpener({ 'sloppy.test': () => tcpStream((origin.address() as AddressInfo).port) });
const listener = await startHttpListener(LOOPBACK, 0, quietContext(opener));

after(async () => {
  await listener.close(100);
  origin.close();
});

test('a late body on a HEAD answer: the GET sent next on its pooled tunnel is sent again on a fresh one', async () => {
  const s = await connectClient(listener.address.port);
  const reader = new Reader(s);
  s.write('HEAD http://sloppy.test/ HTTP/1.1\r\nHost: sloppy.test\r\n\r\n');
  let head = '';
  while (!head.endsWith('\r\n\r\n')) head += (await reader.read(1)).toString('latin1');
  assert.match(head, /^HTTP\/1\.1 200 [^]*Content-Length: 5/);
  // At once, before the stray bytes come: the proxy reuses the tunnel the HEAD went through.
  s.write('GET http://sloppy.test/next HTTP/1.1\r\nHost: sloppy.test\r\n\r\n');
  let answer = '';
  while (!answer.endsWith('\r\n\r\nok') && !/\r\n\r\n[^]*\n$/.test(answer)) answer += (await reader.read(1)).toString('latin1');
  s.destroy();
  assert.match(answer, /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nok$/);
  assert.equal(opener.requests.length, 2, 'the GET went on a tunnel of its own the second time');
});
