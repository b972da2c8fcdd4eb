// An origin that fails the exchange after its stream opened (not HTTP, closes or resets without an
// answer, a head too large): the client's 502 says what the origin did, on which route and pod.
// One that sends stray bytes after a whole answer (a body on a 204 or HEAD): the answer stands.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net, { type AddressInfo } from 'node:net';
import { once } from 'node:events';
import tls from 'node:tls';
import { SimPki } from '../sim/pki.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, Reader, connectClient, quietContext, tcpStream } from './socks-fixtures.test.js';

/** One raw TCP origin per behaviour, each acting on the first bytes of a request. */
async function origin(onRequest: (socket: net.Socket) => void): Promise<net.Server> {
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () => onRequest(socket));
  });
  server.listen(0, LOOPBACK);
  await once(server, 'listening');
  return server;
}

const origins = {
  // A TCP echo service reached with http://: its "answer" is the request itself.
  'echo.test': await origin((s) => s.write('GET / HTTP/1.1\r\nHost: echo.test\r\n\r\n')),
  'hangup.test': await origin((s) => s.end()),
  'reset.test': await origin((s) => s.resetAndDestroy()),
  'bighead.test': await origin((s) => s.end(`HTTP/1.1 200 OK\r\nX-Big: ${'b'.repeat(70 * 1024)}\r\n\r\n`)),
  // Answers that are whole at their head, followed by a body they must not have.
  'nocontent.test': await origin((s) => s.write('HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nstray')),
  'head.test': await origin((s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Head: yes\r\n\r\nstray')),
  // An HTTPS server (Node's TLS, as OpenSSL's) given plain HTTP: it hangs up without a byte.
  'tls.test': await tlsOrigin(),
};

async function tlsOrigin(): Promise<net.Server> {
  const pki = new SimPki();
  const { certPem, keyPem } = pki.hostCert(['tls.test']);
  const server = tls.createServer({ cert: certPem, key: keyPem }).on('tlsClientError', () => undefined);
  server.listen(0, LOOPBACK);
  await once(server, 'listening');
  return server;
}
const opener = new FakeOpener(
  Object.fromEntries(
    Object.entries(origins).map(([host, server]) => [
      host,
      async () => ({ ...(await tcpStream((server.address() as AddressInfo).port, 'shop/web-1:8080')), route: 'staging' }),
    ]),
  ),
);
const ctx = quietContext(opener, 2000);
const listener = await startHttpListener(LOOPBACK, 0, ctx);

after(async () => {
  await listener.close(100);
  for (const server of Object.values(origins)) server.close();
});

async function answerTo(host: string): Promise<string> {
  const s = await connectClient(listener.address.port);
  const reader = new Reader(s);
  s.write(`GET http://${host}/ HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  let out = '';
  while (!/\r\n\r\n[^]*\n$/.test(out)) out += (await reader.read(1)).toString();
  s.destroy();
  return out;
}

for (const [host, what] of [
  ['echo.test', /the origin's answer is not HTTP/],
  ['hangup.test', /the origin closed the connection without answering/],
  ['reset.test', /the origin reset the connection/],
  ['bighead.test', /the origin's response head is larger than 64 KiB/],
] as const) {
  test(`${host}: a 502 naming the route, the target, the pod and what the origin did`, async () => {
    const answer = await answerTo(host);
    assert.match(answer, /^HTTP\/1\.1 502 /);
    const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
    assert.match(body, new RegExp(`^kubectl-proxyout: route staging: ${host.replace('.', '\\.')}:80 via shop/web-1:8080: `));
    assert.match(body, what);
    assert.equal(ctx.stats.snapshot().failuresByReason.internal, undefined, 'not counted as an internal failure');
  });
}

test('http:// to an HTTPS port: the 502 says the origin hung up and that the port is HTTPS, to ask for https://', async () => {
  const s = await connectClient(listener.address.port);
  const reader = new Reader(s);
  s.write('GET http://tls.test:443/ HTTP/1.1\r\nHost: tls.test:443\r\n\r\n');
  let out = '';
  while (!/\r\n\r\n[^]*\n$/.test(out)) out += (await reader.read(1)).toString();
  s.destroy();
  assert.match(out, /^HTTP\/1\.1 502 /);
  assert.match(
    out,
    /kubectl-proxyout: route staging: tls\.test:443 via shop\/web-1:8080: the origin (closed the connection without answering|reset the connection): port 443 is usually HTTPS, ask for https:\/\/tls\.test:443\/ \(a CONNECT tunnel\)\n$/,
  );
  // Port 80 gets no such guess.
  assert.doesNotMatch(await answerTo('hangup.test'), /usually HTTPS/);
});

test('a body after a whole answer (204, HEAD) is dropped: the client gets the answer, and the connection stays usable', async () => {
  const s = await connectClient(listener.address.port);
  const reader = new Reader(s);
  s.write('GET http://nocontent.test/ HTTP/1.1\r\nHost: nocontent.test\r\n\r\n');
  let out = '';
  while (!out.endsWith('\r\n\r\n')) out += (await reader.read(1)).toString();
  assert.match(out, /^HTTP\/1\.1 204 /);
  s.write('HEAD http://head.test/ HTTP/1.1\r\nHost: head.test\r\n\r\n');
  out = '';
  while (!out.endsWith('\r\n\r\n')) out += (await reader.read(1)).toString();
  assert.match(out, /^HTTP\/1\.1 200 [^]*X-Head: yes\r\n/i);
  assert.match(out, /Content-Length: 5\r\n/i);
  assert.equal(reader.isEnded, false, 'the client connection is kept');
  s.destroy();
});
