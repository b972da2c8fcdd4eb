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
 * HEAD gets a head with Content-Length 5; the 5 bytes come late, with the answer to the next
 * request on that connection (so after the proxy sent it there: on a loaded machine a timer
 * let them come first, while the tunnel idled in the pool); anything else gets `ok`. Each
 * connection's requests are kept, "METHOD path" each.
 */
const connections: string[][] = [];
const origin = net.createServer((sock) => {
  sock.on('error', () => undefined);
  const requests: string[] = [];
  connections.push(requests);
  let seen = '';
  let late = false;
  sock.on('data', (c: Buffer) => {
    seen += c.toString('latin1');
    for (let end = seen.indexOf('\r\n\r\n'); end >= 0; end = seen.indexOf('\r\n\r\n')) {
      const head = seen.slice(0, end);
      seen = seen.slice(end + 4);
      requests.push(head.split(' ', 2).join(' '));
      if (head.startsWith('HEAD ')) {
        sock.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n');
        late = true;
        continue;
      }
      if (late) sock.write('HELLO');
      late = false;
      sock.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
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
  // The proxy reuses the tunnel the HEAD went through; the stray bytes come before its answer.
  s.write('GET http://sloppy.test/next HTTP/1.1\r\nHost: sloppy.test\r\n\r\n');
  let answer = '';
  while (!answer.endsWith('\r\n\r\nok') && !/\r\n\r\n[^]*\n$/.test(answer)) answer += (await reader.read(1)).toString('latin1');
  s.destroy();
  assert.match(answer, /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\nok$/);
  assert.deepEqual(connections, [['HEAD /', 'GET /next'], ['GET /next']], 'the GET went on the pooled tunnel, then on a tunnel of its own the second time');
  assert.equal(opener.requests.length, 2);
});
