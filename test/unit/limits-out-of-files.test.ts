// A stream that could not get a file descriptor (EMFILE, ENFILE) is an overload of this proxy:
// SOCKS 0x01 / HTTP 503, never the route's or the API server's failure.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { StreamLimiter } from '../../src/proxy/limits.js';
import { idleUpstreams, pooledBusy, pooledIdle, shedIdleUpstreams } from '../../src/listeners/idle-upstreams.js';
import { OverloadedError, UpstreamApiError, outOfFiles } from '../../src/core/errors.js';
import type { OpenRequest, StreamOpener } from '../../src/core/types.js';

const failing = (err: Error): StreamOpener => ({ open: () => Promise.reject(err) });
const request = { destination: { host: 'web.shop', port: 80 } } as unknown as OpenRequest;

test('EMFILE under an opener, however deep its cause, is an overload; other failures pass through', async () => {
  const emfile = Object.assign(new Error('connect EMFILE 127.0.0.1:6443 - Local (undefined:undefined)'), { code: 'EMFILE' });
  const wrapped = new UpstreamApiError('port-forward tunnel to shop/web-1 failed', { cause: emfile });
  assert.ok(outOfFiles(wrapped));
  await assert.rejects(new StreamLimiter(failing(wrapped), 10).open(request), (err: unknown) => {
    assert.ok(err instanceof OverloadedError);
    assert.match(err.message, /no file descriptor left to open the stream .*EMFILE|no file descriptor left.*port-forward tunnel/);
    return true;
  });
  const other = new UpstreamApiError('port-forward tunnel to shop/web-1 failed: 500');
  await assert.rejects(new StreamLimiter(failing(other), 10).open(request), (err: unknown) => err === other);
});

test('a new stream closes pooled idle upstreams beyond the cap, the oldest first, and never more', async () => {
  const pooled = Array.from({ length: 5 }, () => new PassThrough());
  for (const s of pooled) pooledIdle(s, 60_000);
  const opener: StreamOpener = { open: async () => ({ stream: new PassThrough(), via: 'pod' }) };
  const limiter = new StreamLimiter(opener, 6, { count: idleUpstreams, shed: shedIdleUpstreams });
  await limiter.open(request); // 1 open + 5 idle: room for it
  assert.equal(idleUpstreams(), 5);
  await limiter.open(request); // 2 open + 5 idle > 6: the oldest idle one goes
  assert.deepEqual(
    pooled.map((s) => s.destroyed),
    [true, false, false, false, false],
  );
  assert.equal(idleUpstreams(), 4);
  for (const s of pooled) pooledBusy(s);
  assert.equal(idleUpstreams(), 0);
});

test('a stream refused at the cap closes no pooled idle upstream (a request may still reuse it)', async () => {
  const opener: StreamOpener = { open: async () => ({ stream: new PassThrough(), via: 'pod' }) };
  const limiter = new StreamLimiter(opener, 2, { count: idleUpstreams, shed: shedIdleUpstreams });
  await limiter.open(request);
  await limiter.open(request); // 2 open: the cap
  // An upstream gone idle in a pool since (a third, released): a request reusing it needs no new slot.
  const pooled = new PassThrough();
  pooledIdle(pooled, 60_000);
  await assert.rejects(limiter.open(request), OverloadedError);
  assert.equal(pooled.destroyed, false, 'closed for a stream that was refused anyway');
  assert.equal(idleUpstreams(), 1);
  pooledBusy(pooled);
});
