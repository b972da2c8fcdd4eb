import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { ConnectTimeoutError, ConnectionRefusedError, NoReadyEndpointError, NotAllowedError, StartupError } from '../../src/core/errors.js';
import type { OpenRequest } from '../../src/core/types.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, Reader, connectClient, delay, quietContext, startEcho, tcpStream, waitFor } from './socks-fixtures.test.js';

const run = promisify(execFile);
const HANDSHAKE_MS = 400;

const echo = await startEcho();
const origin = http.createServer((req, res) => res.end(`hello from ${req.headers.host}${req.url}`));
origin.listen(0, LOOPBACK);
await once(origin, 'listening');
const originPort = (origin.address() as AddressInfo).port;

let slowRequest: OpenRequest | undefined;
const opener = new FakeOpener(
  {
    'web.test': () => tcpStream(originPort),
    'refused.test': () => Promise.reject(new ConnectionRefusedError('nothing listens on 80')),
    'not-allowed.test': () => Promise.reject(new NotAllowedError('outside every route')),
    'timeout.test': () => Promise.reject(new ConnectTimeoutError('took too long')),
    'not-ready.test': () => Promise.reject(new NoReadyEndpointError('no ready endpoint')),
    'slow.test': (req) => {
      slowRequest = req;
      return new Promise((_resolve, reject) => req.signal.addEventListener('abort', () => reject(req.signal.reason)));
    },
  },
  () => tcpStream(echo.port),
);
const ctx = quietContext(opener, HANDSHAKE_MS);
const listener = await startHttpListener(LOOPBACK, 0, ctx);
const proxy = `http://${LOOPBACK}:${listener.address.port}`;

after(async () => {
  await listener.close(100);
  echo.close();
  origin.close();
});

async function curl(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  // A clean environment: no proxy variables from the host may interfere.
  return run('/usr/bin/curl', ['-sS', '--max-time', '10', ...args], { env: { PATH: '/usr/bin:/bin' } });
}

async function rawConnect(target: string, extra = ''): Promise<{ reader: Reader; head: string }> {
  const s = await connectClient(listener.address.port);
  const reader = new Reader(s);
  s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n${extra}`);
  let head = '';
  while (!head.endsWith('\r\n\r\n')) head += (await reader.read(1)).toString('latin1');
  return { reader, head };
}

async function assertServesNormally(): Promise<void> {
  const { reader, head } = await rawConnect('echo.test:7');
  assert.match(head, /^HTTP\/1\.1 200 /);
  reader.socket.end('ok');
  assert.equal((await reader.rest()).toString(), 'ok');
}

test('curl -p tunnels through CONNECT', async () => {
  const { stdout } = await curl('-p', '-x', proxy, 'http://web.test/hello');
  assert.equal(stdout, 'hello from web.test/hello');
  const req = opener.requests.find((r) => r.destination.host === 'web.test');
  assert.deepEqual(req?.destination, { host: 'web.test', port: 80, type: 'domain' });
  assert.equal(req?.frontEnd, 'http-connect');
});

test('bytes pipelined after the CONNECT head go upstream first; half-close works', async () => {
  const { reader, head } = await rawConnect('echo.test:7', 'early|');
  assert.equal(head, 'HTTP/1.1 200 Connection established\r\n\r\n');
  reader.socket.end('late');
  assert.equal((await reader.rest()).toString(), 'early|late');
  await waitFor(() => ctx.stats.snapshot().openStreams === 0, 2000, 'stream closed');
});

test('CONNECT to a bracketed IPv6 literal', async () => {
  const { reader, head } = await rawConnect('[FD00::0:1]:8443');
  assert.match(head, /^HTTP\/1\.1 200 /);
  reader.socket.end();
  await reader.rest();
  assert.deepEqual(opener.requests.at(-1)?.destination, { host: 'fd00::1', port: 8443, type: 'ipv6' });
});

test('CONNECT to an IPv6 literal without brackets, as wget and Python before 3.12 send it', async () => {
  // wget 1.21: "CONNECT ::1:8443 HTTP/1.1" with "Host: ::1:8443"; Python 3.11's http.client the same.
  for (const [target, host] of [
    ['::1:8443', '::1'],
    ['FD00::0:1:8443', 'fd00::1'],
    ['::ffff:10.0.0.7:8443', '::ffff:10.0.0.7'],
  ] as const) {
    const { reader, head } = await rawConnect(target);
    assert.match(head, /^HTTP\/1\.1 200 /, target);
    reader.socket.end();
    await reader.rest();
    assert.deepEqual(opener.requests.at(-1)?.destination, { host, port: 8443, type: 'ipv6' }, target);
  }
});

test('open failures become their HTTP status with a text body and Connection: close', async () => {
  const want: Record<string, number> = { 'refused.test': 502, 'not-allowed.test': 403, 'timeout.test': 504, 'not-ready.test': 503 };
  for (const [host, status] of Object.entries(want)) {
    const { reader, head } = await rawConnect(`${host}:80`);
    assert.match(head, new RegExp(`^HTTP/1\\.1 ${status} `), host);
    assert.match(head, /\r\nConnection: close\r\n/i);
    assert.match(head, /\r\nContent-Type: text\/plain/i);
    const body = (await reader.rest()).toString();
    assert.match(body, new RegExp(`cannot connect to ${host}:80`));
  }
  const { stderr } = await curl('-p', '-x', proxy, 'http://refused.test/').catch((e: { stderr: string }) => e);
  assert.match(stderr, /502/);
});

test('malformed CONNECT targets get 400', async () => {
  for (const target of ['nonsense', 'web.test:0', 'web.test:99999', '[zz]:80', 'fd00::1', '1:2:3:4:5:6:7:8']) {
    const { reader, head } = await rawConnect(target);
    assert.match(head, /^HTTP\/1\.1 400 /, target);
    await reader.rest();
  }
  // The reason fits the mistake: a name too long or with a bad character is not "not host:port".
  const cases: Array<[string, RegExp]> = [
    [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(64)}:443`, /CONNECT host is 256 characters long; a DNS name has at most 253/],
    ['we$b.test:443', /CONNECT host is not a DNS name or IP address/],
    ['web.test', /CONNECT target must be host:port or \[ipv6\]:port, port 1-65535, got "web\.test"/],
  ];
  for (const [target, why] of cases) {
    const { reader } = await rawConnect(target);
    assert.match((await reader.rest()).toString('latin1'), why, target);
  }
  await assertServesNormally();
});

test('a scoped IPv6 CONNECT target is refused as SOCKS refuses it (403), naming why', async () => {
  for (const target of ['[fe80::1%eth0]:80', 'fe80::1%eth0:80', '[fe80::1%25eth0]:443']) {
    const { reader, head } = await rawConnect(target);
    assert.match(head, /^HTTP\/1\.1 403 /, target);
    const body = (await reader.rest()).toString('latin1');
    assert.match(body, /fe80::1%eth0 is not an IP address the proxy can route: a scoped IPv6 address names an interface of your own machine/, target);
  }
  await assertServesNormally();
});

test('hostile input: garbage, oversized heads; the listener keeps serving', async () => {
  const cases: Array<[string, RegExp]> = [
    ['\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03', /^HTTP\/1\.1 400 /],
    ['GET / HTTP/1.1\r\nHost: x\r\nX-Big: ' + 'a'.repeat(40 * 1024) + '\r\n\r\n', /^HTTP\/1\.1 431 /],
    ['CONNECT a:1 HTTP/1.1\r\nBad Header\r\n\r\n', /^HTTP\/1\.1 400 /],
  ];
  for (const [input, want] of cases) {
    const s = await connectClient(listener.address.port);
    const reader = new Reader(s);
    s.write(Buffer.from(input, 'latin1'));
    const out = (await reader.rest()).toString('latin1');
    assert.match(out, want);
  }
  await assertServesNormally();
});

test('silent and dribbling clients are dropped after the head timeout', async () => {
  const silent = await connectClient(listener.address.port);
  const started = Date.now();
  await new Reader(silent).rest(HANDSHAKE_MS * 10);
  assert.ok(Date.now() - started < HANDSHAKE_MS * 5, `silent client dropped after ${Date.now() - started} ms`);

  const slow = await connectClient(listener.address.port);
  const reader = new Reader(slow);
  const head = 'CONNECT echo.test:7 HTTP/1.1\r\nHost: echo.test:7\r\nX-Pad: ' + 'p'.repeat(200);
  const t0 = Date.now();
  for (const ch of head) {
    if (reader.isEnded) break;
    slow.write(ch);
    await delay(10);
  }
  await reader.rest(HANDSHAKE_MS * 10);
  assert.ok(Date.now() - t0 < HANDSHAKE_MS * 5, `dribbling client dropped after ${Date.now() - t0} ms`);
  await assertServesNormally();
});

test('an established tunnel outlives the head timeout', async () => {
  const { reader, head } = await rawConnect('echo.test:7');
  assert.match(head, /^HTTP\/1\.1 200 /);
  await delay(HANDSHAKE_MS * 3);
  reader.socket.write('still here');
  assert.equal((await reader.read(10)).toString(), 'still here');
  reader.socket.end();
  await reader.rest();
});

test('client disconnect during a slow CONNECT aborts the open', async () => {
  const s = await connectClient(listener.address.port);
  s.write('CONNECT slow.test:80 HTTP/1.1\r\nHost: slow.test:80\r\n\r\n');
  await waitFor(() => slowRequest !== undefined, 2000, 'open() called');
  s.destroy();
  await waitFor(() => slowRequest!.signal.aborted, 2000, 'signal aborted');
  await assertServesNormally();
});

test('close(grace) cuts tunnels after the grace period; port in use is a clear StartupError', async () => {
  const l = await startHttpListener(LOOPBACK, 0, ctx);
  await assert.rejects(
    startHttpListener(LOOPBACK, l.address.port, ctx),
    (err: Error) => err instanceof StartupError && err.message.includes(`127.0.0.1:${l.address.port}`) && /already in use/.test(err.message),
  );
  const s = await connectClient(l.address.port);
  const reader = new Reader(s);
  s.write('CONNECT echo.test:7 HTTP/1.1\r\nHost: echo.test\r\n\r\n');
  await reader.read(39);
  assert.equal(l.connections(), 1);
  const started = Date.now();
  await l.close(200);
  assert.ok(Date.now() - started >= 150);
  await reader.rest();
  assert.equal(l.connections(), 0);
});
