// A SOCKS client pointed at the HTTP listener (ALL_PROXY=socks5h://…:3128): refused in SOCKS — no
// acceptable method (SOCKS5), "rejected" (SOCKS4) — and a failure line in the log saying why.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, Reader, connectClient, quietContext } from './socks-fixtures.test.js';

const ctx = quietContext(new FakeOpener({}));
const listener = await startHttpListener(LOOPBACK, 0, ctx);
after(() => listener.close(100));

async function exchange(bytes: Buffer): Promise<Buffer> {
  const s = await connectClient(listener.address.port);
  s.write(bytes);
  const answer = await new Reader(s).rest();
  s.destroy();
  return answer;
}

test('a SOCKS5 greeting gets "no acceptable method", a SOCKS4 request "rejected"; both are logged as failures', async () => {
  const messages: string[] = [];
  const failed = ctx.stats.failed.bind(ctx.stats);
  ctx.stats.failed = (frontEnd, client, destination, err) => {
    messages.push((err as Error).message);
    return failed(frontEnd, client, destination, err);
  };
  assert.deepEqual([...(await exchange(Buffer.from([5, 2, 0, 2])))], [5, 0xff]);
  assert.deepEqual([...(await exchange(Buffer.from([4, 1, 0, 80, 10, 0, 0, 1, 0])))], [0, 0x5b, 0, 0, 0, 0, 0, 0]);
  assert.equal(messages.length, 2);
  for (const [i, version] of [5, 4].entries()) {
    assert.equal(
      messages[i],
      `a SOCKS${version} client reached the HTTP proxy listener: use http://127.0.0.1:${listener.address.port} as an HTTP proxy, or a SOCKS listener (--listen-socks)`,
    );
  }
});

test('a TLS client (HTTPS_PROXY=https://…) gets 400 and a failure line saying to use http://', async () => {
  const messages: string[] = [];
  const failed = ctx.stats.failed.bind(ctx.stats);
  ctx.stats.failed = (frontEnd, client, destination, err) => {
    messages.push((err as Error).message);
    return failed(frontEnd, client, destination, err);
  };
  // What curl -x https://…, undici's ProxyAgent('https://…') and urllib3 send first: a ClientHello.
  const hello = Buffer.from('16030100c4010000c00303', 'hex');
  const answer = (await exchange(Buffer.concat([hello, Buffer.alloc(190)]))).toString('latin1');
  ctx.stats.failed = failed;
  assert.match(answer, /^HTTP\/1\.1 400 /);
  assert.deepEqual(messages, [
    `a TLS client reached the HTTP proxy listener, which speaks plain HTTP: use http://127.0.0.1:${listener.address.port} as the proxy URL, not https://`,
  ]);
});

test('other bytes that are not HTTP still get 400', async () => {
  const answer = (await exchange(Buffer.from('\x17\x03\x01\x00\x05hello', 'latin1'))).toString('latin1');
  assert.match(answer, /^HTTP\/1\.1 400 [^]*malformed HTTP request/);
});

test('a method the parser does not know gets 501 naming it, pipelined behind another request too; not "malformed"', async () => {
  const ban = (await exchange(Buffer.from('BAN http://web.test/ HTTP/1.1\r\nHost: web.test\r\n\r\n'))).toString('latin1');
  assert.match(ban, /^HTTP\/1\.1 501 [^]*method BAN is not supported/);
  // In the status line too, which Go's and Java's clients show alone.
  assert.match(ban, /^HTTP\/1\.1 501 Not Implemented \(kubectl-proxyout: method BAN is not supported: [^\r\n]*\)\r\n/);
  const behind = (
    await exchange(Buffer.from('OPTIONS http://web.test HTTP/1.1\r\nMax-Forwards: 0\r\n\r\nPURGEALL http://web.test/ HTTP/1.1\r\n\r\n'))
  ).toString('latin1');
  assert.match(behind, /^HTTP\/1\.1 200 [^]*HTTP\/1\.1 501 [^]*method PURGEALL is not supported/);
});
