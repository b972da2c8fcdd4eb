// The password throttle: per-source buckets (all of loopback one, IPv6 per /64, IPv4 per address),
// wrong answers delayed and capped per source, right passwords never refused or delayed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { FailedAuthThrottle } from '../../src/auth/throttle.js';
import { LOOPBACK_SOURCE, sourceBucket } from '../../src/auth/source.js';
import { ProxyAuth } from '../../src/auth/credentials.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { startSocksListener } from '../../src/listeners/socks-server.js';
import { FakeOpener, Reader, quietContext, startEcho, tcpStream } from './socks-fixtures.test.js';

test('source buckets: all of loopback is one source, IPv6 counts per /64, IPv4 per address', () => {
  for (const a of ['127.0.0.1', '127.0.0.2', '127.255.3.4', '::1', '::ffff:127.0.0.1', '::ffff:127.9.9.9', '[::1]', '0:0:0:0:0:0:0:1']) {
    assert.equal(sourceBucket(a), LOOPBACK_SOURCE, a);
  }
  assert.equal(sourceBucket('10.0.0.1'), '10.0.0.1');
  assert.notEqual(sourceBucket('10.0.0.1'), sourceBucket('10.0.0.2'));
  assert.equal(sourceBucket('::ffff:10.0.0.1'), sourceBucket('10.0.0.1'), 'IPv4-mapped counts as the IPv4 address');
  assert.equal(sourceBucket('2001:db8:1:2::1'), sourceBucket('2001:db8:1:2:ffff:ffff:ffff:ffff'), 'same /64');
  assert.equal(sourceBucket('2001:db8:1:2::1'), '2001:db8:1:2::/64');
  assert.notEqual(sourceBucket('2001:db8:1:2::1'), sourceBucket('2001:db8:1:3::1'), 'another /64');
  assert.equal(sourceBucket('fe80::1%eth0'), sourceBucket('fe80::2'), 'zone ids do not make new sources');
  assert.equal(sourceBucket(undefined), 'unknown');
});

test('wrong answers from many loopback addresses share one budget: the third waits a second delay', async () => {
  const delayMs = 150;
  const t = new FailedAuthThrottle({ delayMs, maxPendingPerSource: 2 });
  const started = Date.now();
  const answeredAt: number[] = [];
  for (const a of ['127.0.0.2', '127.0.0.3', '127.1.2.3', '::1']) t.delayFailure(a, () => answeredAt.push(Date.now() - started));
  t.delayFailure('10.0.0.1', () => {});
  assert.equal(t.pending('127.0.0.1'), 4, 'every 127.x and ::1 counts against loopback');
  assert.equal(t.pending('10.0.0.1'), 1, 'another IPv4 address has its own budget');
  await new Promise((r) => setTimeout(r, delayMs * 2 + 100));
  while (answeredAt.length < 4) await new Promise((r) => setTimeout(r, 20));
  // Timers never fire early: with two running at a time, answers 3 and 4 come a full delay later.
  assert.ok(answeredAt[1]! >= delayMs - 5, `second answered at ${answeredAt[1]} ms`);
  assert.ok(answeredAt[2]! >= 2 * delayMs - 5, `third answered at ${answeredAt[2]} ms`);
  assert.ok(answeredAt[3]! >= 2 * delayMs - 5, `fourth answered at ${answeredAt[3]} ms`);
  assert.equal(t.pending('127.0.0.1'), 0);
});

test('queued wrong answers of clients that left are skipped, not waited for', async () => {
  const t = new FailedAuthThrottle({ delayMs: 50, maxPendingPerSource: 1 });
  const answered: string[] = [];
  t.delayFailure('10.0.0.1', () => answered.push('a'));
  t.delayFailure(
    '10.0.0.1',
    () => answered.push('gone'),
    () => true,
  );
  t.delayFailure('10.0.0.1', () => answered.push('c'));
  while (answered.length < 2) await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(answered, ['a', 'c']);
});

/** One HTTP proxy request from a given local address; resolves with its status. */
function proxyGet(port: number, localAddress: string, auth?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const headers = auth ? { 'Proxy-Authorization': `Basic ${Buffer.from(auth).toString('base64')}` } : {};
    const req = http.get({ host: '127.0.0.1', port, localAddress, path: 'http://echo.svc:7/', headers, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', reject);
  });
}

test('no lockout: with 4 wrong guesses pending from loopback, the right password passes at once (HTTP and SOCKS5)', async (t) => {
  const origin = http.createServer((_req, res) => res.end('ok'));
  origin.listen(0, '127.0.0.1');
  await once(origin, 'listening');
  const echo = await startEcho();
  const ctx = quietContext(new FakeOpener({}, (req) => tcpStream(req.frontEnd === 'socks5' ? echo.port : (origin.address() as net.AddressInfo).port)));
  // The defaults: 1 s per wrong answer, 4 running per source.
  ctx.auth = new ProxyAuth({ username: 'alice', password: 'right' });
  const httpL = await startHttpListener('127.0.0.1', 0, ctx);
  const socks = await startSocksListener('127.0.0.1', 0, ctx);
  t.after(async () => {
    await httpL.close(0);
    await socks.close(0);
    origin.close();
    echo.close();
  });
  const guesses = [1, 2, 3, 4].map(() => proxyGet(httpL.address.port, '127.0.0.1', 'alice:wrong'));
  // Let the listener check all four before the owner comes.
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(await proxyGet(httpL.address.port, '127.0.0.1', 'alice:right'), 200, 'the owner is not refused');

  const s = net.connect({ host: '127.0.0.1', port: socks.address.port, localAddress: '127.0.0.1' });
  s.on('error', () => {});
  await once(s, 'connect');
  const r = new Reader(s);
  const user = Buffer.from('alice');
  const pass = Buffer.from('right');
  s.write(Buffer.concat([Buffer.from([5, 1, 2, 1, user.length]), user, Buffer.from([pass.length]), pass]));
  assert.deepEqual([...(await r.read(4))], [5, 2, 1, 0], 'SOCKS5: RFC 1929 success');
  s.destroy();

  assert.deepEqual(await Promise.all(guesses), [407, 407, 407, 407]);
});
