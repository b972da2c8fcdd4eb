// The relay's edges (src/listeners/relay.ts): the tear-down clock after the client's FIN, streams
// that ended before the relay began, errors late or from both sides, and backpressure towards a
// slow upstream. relay.test.ts has the main paths.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Duplex } from 'node:stream';
import { relay } from '../../src/listeners/relay.js';
import { withSocketPair } from '../helpers/socket-pair.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** An upstream that takes whatever is written and whose readable side the test pushes. */
function quietUpstream(): Duplex & { finalCalled: boolean } {
  const upstream = new Duplex({
    read() {},
    write(_c, _e, cb) {
      cb();
    },
    final(cb) {
      upstream.finalCalled = true;
      cb();
    },
  }) as Duplex & { finalCalled: boolean };
  upstream.finalCalled = false;
  return upstream;
}

test("after the client's FIN each upstream byte restarts the tear-down clock: a slow answer is not cut off", { timeout: 10_000 }, () =>
  withSocketPair(async ({ outer, inner }) => {
    const upstream = quietUpstream();
    // A grace 6× the gap between bytes: a busy machine's late timer must not pass for a slow answer.
    const done = relay(inner, upstream, undefined, 600);
    const chunks: Buffer[] = [];
    outer.on('data', (c: Buffer) => chunks.push(c));
    const clientEnded = once(outer, 'end');
    outer.end(); // the request's FIN; the answer trickles in for 4× the grace
    for (let i = 0; i < 24; i++) {
      await sleep(100);
      upstream.push('x');
    }
    upstream.push(null);
    const result = await done;
    await clientEnded;
    assert.equal(result.error, undefined, 'the clock did not run out while bytes kept coming');
    assert.equal(Buffer.concat(chunks).toString(), 'x'.repeat(24));
    assert.equal(result.bytesToClient, 24);
  }),
);

test("before the upstream's first byte the clock after the client's FIN waits longer: a pod the runtime is still dialling answers", { timeout: 10_000 }, () =>
  withSocketPair(async ({ outer, inner }) => {
    const upstream = quietUpstream();
    const done = relay(inner, upstream, undefined, 100, 2_000);
    const chunks: Buffer[] = [];
    outer.on('data', (c: Buffer) => chunks.push(c));
    const clientEnded = once(outer, 'end');
    outer.end('hello'); // request, then FIN (nc -N); the runtime dials the pod for 5× the grace
    await sleep(500);
    upstream.push('hello');
    upstream.push(null);
    const result = await done;
    await clientEnded;
    assert.equal(result.error, undefined, 'the stream was not reset before the pod was reached');
    assert.equal(Buffer.concat(chunks).toString(), 'hello');
  }),
);

test('a client whose FIN came before the relay started: the clock starts at once and a silent upstream is reset after the grace', { timeout: 10_000 }, () =>
  withSocketPair(async ({ outer, inner }) => {
    outer.end();
    inner.resume();
    await once(inner, 'end');
    inner.pause();
    const upstream = quietUpstream();
    const result = await relay(inner, upstream, undefined, 100, 100);
    assert.ok(upstream.finalCalled, 'the FIN was passed on');
    assert.equal((result.error as NodeJS.ErrnoException | undefined)?.code, 'ERR_STREAM_PREMATURE_CLOSE');
    assert.ok(upstream.destroyed && inner.destroyed);
  }),
);

test('an upstream that ended before the relay started: the client gets its FIN and may still send', { timeout: 10_000 }, () =>
  withSocketPair(async ({ outer, inner }) => {
    const got: Buffer[] = [];
    const upstream = new Duplex({
      read() {},
      write(c: Buffer, _e, cb) {
        got.push(c);
        cb();
      },
      final(cb) {
        cb();
      },
    });
    upstream.push(null);
    upstream.resume();
    await once(upstream, 'end');
    const done = relay(inner, upstream);
    outer.resume();
    await once(outer, 'end');
    outer.end('after');
    const result = await done;
    assert.equal(result.error, undefined);
    assert.equal(Buffer.concat(got).toString(), 'after');
  }),
);

test('errors after the relay is over never become uncaught', { timeout: 10_000 }, () =>
  withSocketPair(async ({ outer, inner }) => {
    const upstream = quietUpstream();
    const done = relay(inner, upstream);
    upstream.destroy(new Error('tunnel broke'));
    assert.equal((await done).error?.message, 'tunnel broke');
    // Without a listener, emit('error') throws here.
    assert.doesNotThrow(() => upstream.emit('error', new Error('late, from the tunnel')));
    assert.doesNotThrow(() => inner.emit('error', new Error('late, from the client socket')));
    outer.destroy();
  }),
);

test('when both sides fail, the first error is the one reported', { timeout: 10_000 }, () =>
  withSocketPair(async ({ inner }) => {
    const upstream = quietUpstream();
    const done = relay(inner, upstream);
    upstream.destroy(new Error('first: the tunnel broke'));
    inner.destroy(new Error('second: the client reset'));
    assert.equal((await done).error?.message, 'first: the tunnel broke');
  }),
);

test('a slow upstream holds the client back: the relay buffers about one chunk, and every byte arrives in order', { timeout: 30_000 }, () =>
  withSocketPair(async ({ outer, inner }) => {
    const received: Buffer[] = [];
    let maxBuffered = 0;
    const upstream = new Duplex({
      highWaterMark: 16 << 10,
      read() {},
      write(c: Buffer, _e, cb) {
        received.push(c);
        maxBuffered = Math.max(maxBuffered, upstream.writableLength);
        setTimeout(cb, 1); // one chunk a timer tick: far slower than loopback
      },
      final(cb) {
        upstream.push(null);
        cb();
      },
    });
    const done = relay(inner, upstream);
    outer.resume();
    const sent = randomBytes(4 << 20);
    outer.end(sent);
    const result = await done;
    assert.equal(result.error, undefined);
    assert.equal(sha(Buffer.concat(received)), sha(sent));
    // Without the pause on a full upstream the relay would hold most of the 4 MiB itself.
    assert.ok(maxBuffered <= 256 << 10, `the upstream's buffer peaked at ${maxBuffered} bytes`);
  }),
);
