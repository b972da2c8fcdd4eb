// RetryBeforeFirstByte (moving a stream to another endpoint until the pod speaks) and
// StreamLimiter (--max-streams), against in-memory streams.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { once } from 'node:events';
import { RetryBeforeFirstByte, type Reopen } from '../../src/routes/cluster/retry-stream.js';
import { StreamLimiter } from '../../src/proxy/limits.js';
import { ConnectionRefusedError, OverloadedError, UpstreamApiError } from '../../src/core/errors.js';
import type { OpenRequest, StreamOpener } from '../../src/core/types.js';
import { RecordingDuplex } from '../helpers/recording-duplex.js';

const refused = () => new ConnectionRefusedError('dial refused', { retryable: true });
const tick = () => new Promise((r) => setImmediate(r));

function reopenWith(...next: Array<RecordingDuplex | undefined>): Reopen & { calls: number } {
  const fn = Object.assign(
    async () => {
      fn.calls++;
      return next.shift();
    },
    { calls: 0 },
  );
  return fn;
}

test('a refusal before the first byte moves the stream: bytes and FIN are replayed, answers flow', async () => {
  const a = new RecordingDuplex();
  const b = new RecordingDuplex();
  const reopen = reopenWith(b);
  const s = new RetryBeforeFirstByte(a, reopen);
  s.write('GET / HTTP/1.1\r\n');
  s.end('\r\n');
  await tick();
  a.destroy(refused());
  await tick();
  assert.equal(reopen.calls, 1);
  assert.equal(b.text(), 'GET / HTTP/1.1\r\n\r\n');
  assert.ok(b.ended, 'the client FIN reached the new endpoint');
  b.push('HTTP/1.1 200 OK\r\n\r\n');
  b.push(null);
  const chunks: Buffer[] = [];
  s.on('data', (c: Buffer) => chunks.push(c));
  await once(s, 'end');
  assert.equal(Buffer.concat(chunks).toString(), 'HTTP/1.1 200 OK\r\n\r\n');
  assert.ok(s.committed);
});

test('a stream that failed before the wrapper was made (its events already out) still moves', async () => {
  // A v4 WebSocket whose set-up and refusal came in one burst: the stream is handed over after
  // process.nextTick has already emitted its 'error' and 'close'.
  const a = new RecordingDuplex();
  a.on('error', () => undefined);
  a.destroy(refused());
  await tick();
  const b = new RecordingDuplex();
  const reopen = reopenWith(b);
  const s = new RetryBeforeFirstByte(a, reopen);
  s.write('GET / HTTP/1.1\r\n\r\n');
  await tick();
  assert.equal(reopen.calls, 1, 'moved to another endpoint');
  assert.equal(b.text(), 'GET / HTTP/1.1\r\n\r\n');
  // Closed without an error (nothing to move for): the wrapper fails instead of waiting for ever.
  const c = new RecordingDuplex();
  c.destroy();
  await tick();
  const t = new RetryBeforeFirstByte(c, reopenWith());
  const [err] = await once(t, 'error');
  assert.match((err as Error).message, /closed unexpectedly/);
});

test('after the pod spoke, an error ends the stream instead of moving it', async () => {
  const a = new RecordingDuplex();
  const reopen = reopenWith(new RecordingDuplex());
  const s = new RetryBeforeFirstByte(a, reopen);
  s.resume();
  a.push('banner\n');
  await tick();
  const failed = once(s, 'error');
  a.destroy(refused());
  const [err] = await failed;
  assert.ok(err instanceof ConnectionRefusedError);
  assert.equal(reopen.calls, 0);
});

test('errors that are not retryable, or too much unanswered upload, are never replayed', async () => {
  const s1 = new RetryBeforeFirstByte(new RecordingDuplex(), reopenWith(new RecordingDuplex()));
  const e1 = once(s1, 'error');
  (s1 as unknown as { inner: RecordingDuplex }).inner.destroy(new UpstreamApiError('tunnel broke'));
  assert.ok((await e1)[0] instanceof UpstreamApiError);

  const a = new RecordingDuplex();
  const reopen = reopenWith(new RecordingDuplex());
  const s2 = new RetryBeforeFirstByte(a, reopen, 8);
  s2.write(Buffer.alloc(9));
  await tick();
  assert.ok(s2.committed, 'more than maxReplay bytes commit the stream');
  const e2 = once(s2, 'error');
  a.destroy(refused());
  assert.ok((await e2)[0] instanceof ConnectionRefusedError);
  assert.equal(reopen.calls, 0);
});

test('no endpoint left: the original refusal ends the stream; destroyed while moving: the new one is closed', async () => {
  const a = new RecordingDuplex();
  const s = new RetryBeforeFirstByte(a, reopenWith(undefined));
  const failed = once(s, 'error');
  a.destroy(refused());
  assert.ok((await failed)[0] instanceof ConnectionRefusedError);

  const b = new RecordingDuplex();
  const late = new RecordingDuplex();
  let release!: () => void;
  const s2 = new RetryBeforeFirstByte(b, async (_err, signal) => {
    await new Promise<void>((r) => (release = r));
    assert.ok(signal.aborted, 'the reopen is told the stream is gone');
    return late;
  });
  b.destroy(refused());
  await tick();
  s2.destroy();
  release();
  await tick();
  assert.ok(late.destroyed);
});

/** An opener whose streams are PassThroughs; `fail` makes the next open reject. */
function fakeOpener(): StreamOpener & { fail: boolean } {
  return {
    fail: false,
    async open() {
      if (this.fail) throw new ConnectionRefusedError('nope');
      return { stream: new PassThrough(), via: 'ns/pod:1' };
    },
  };
}

const request = {
  destination: { host: 'web', port: 80, type: 'domain' },
  frontEnd: 'socks5',
  client: 'c',
  signal: new AbortController().signal,
} as OpenRequest;

test('StreamLimiter refuses past the limit with OverloadedError and frees slots when streams close', async () => {
  const inner = fakeOpener();
  const limiter = new StreamLimiter(inner, 2);
  const a = await limiter.open(request);
  await limiter.open(request);
  await assert.rejects(limiter.open(request), (err) => err instanceof OverloadedError && /limit is 2/.test(err.message));
  a.stream.destroy();
  await once(a.stream, 'close');
  assert.equal(limiter.inUse, 1);
  await limiter.open(request);
  inner.fail = true;
  await assert.rejects(limiter.open(request), OverloadedError);
  assert.equal(limiter.inUse, 2, 'a failed open does not keep a slot');
  const unlimited = new StreamLimiter(fakeOpener(), 0);
  for (let i = 0; i < 5; i++) await unlimited.open(request);
});
