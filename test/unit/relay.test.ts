import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { Duplex } from 'node:stream';
import { once } from 'node:events';
import { relay, startRelay, type RelayResult } from '../../src/listeners/relay.js';
import { PiecedUpstream } from '../helpers/pieced-upstream.js';
import { RetryBeforeFirstByte } from '../../src/routes/cluster/retry-stream.js';
import { ConnectionRefusedError } from '../../src/core/errors.js';
import { createLogger, type Logger } from '../../src/core/log.js';
import { StreamStats } from '../../src/listeners/stream-stats.js';
import { socketPair, spyWrites, withSocketPair } from '../helpers/socket-pair.js';

function collect(s: net.Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  s.on('data', (c: Buffer) => chunks.push(c));
  return new Promise((resolve) => s.once('end', () => resolve(Buffer.concat(chunks))));
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** An in-memory echo: what is written comes back; the writer's end ends it. */
function echoDuplex(): Duplex {
  return new Duplex({
    read() {},
    write(chunk, _enc, cb) {
      this.push(chunk);
      cb();
    },
    final(cb) {
      this.push(null);
      cb();
    },
  });
}

test('half-close propagates both ways and the relay resolves once both are done', async () => {
  const a = await socketPair(); // client side
  const b = await socketPair(); // upstream side
  const done = relay(a.inner, b.inner, Buffer.from('head:'));
  const originGot = collect(b.outer);
  const clientGot = collect(a.outer);
  a.outer.end('hello'); // client FIN first
  assert.equal((await originGot).toString(), 'head:hello');
  // The upstream can still answer after the client's FIN.
  b.outer.end('bye');
  assert.equal((await clientGot).toString(), 'bye');
  const result = await done;
  assert.deepEqual(result, { bytesFromClient: 10, bytesToClient: 3 });
  assert.ok(a.inner.destroyed && b.inner.destroyed);
  a.close();
  b.close();
});

test('upstream FIN first: the client may keep sending', async () => {
  const a = await socketPair();
  const b = await socketPair();
  const done = relay(a.inner, b.inner);
  const clientGot = collect(a.outer);
  const originGot = collect(b.outer);
  b.outer.end('banner');
  assert.equal((await clientGot).toString(), 'banner');
  a.outer.write('late ');
  a.outer.end('data');
  assert.equal((await originGot).toString(), 'late data');
  const result = await done;
  assert.equal(result.error, undefined);
  assert.equal(result.bytesFromClient, 9);
  a.close();
  b.close();
});

test('8 MiB each way arrive intact', async () => {
  const a = await socketPair();
  const b = await socketPair();
  const up = randomBytes(8 * 1024 * 1024);
  const down = randomBytes(8 * 1024 * 1024);
  const done = relay(a.inner, b.inner);
  const originGot = collect(b.outer);
  const clientGot = collect(a.outer);
  a.outer.end(up);
  b.outer.end(down);
  assert.equal(sha(await originGot), sha(up));
  assert.equal(sha(await clientGot), sha(down));
  const result = await done;
  assert.equal(result.bytesFromClient, up.length);
  assert.equal(result.bytesToClient, down.length);
  a.close();
  b.close();
});

test('a slow reader does not make the relay buffer unboundedly', async () => {
  const a = await socketPair();
  const b = await socketPair();
  const done = relay(a.inner, b.inner);
  // More than loopback kernel buffers can absorb, so the relay's own buffering would show.
  const total = 48 * 1024 * 1024;
  let maxBuffered = 0;
  const sample = (): void => {
    maxBuffered = Math.max(maxBuffered, a.inner.writableLength + b.inner.readableLength);
  };
  const sampler = setInterval(sample, 1);
  try {
    let sent = 0;
    void (async () => {
      const chunk = Buffer.alloc(64 * 1024, 7);
      for (; sent < total && !b.outer.destroyed; sent += chunk.length) {
        if (!b.outer.write(chunk)) await once(b.outer, 'drain');
      }
      b.outer.end();
    })();
    // The client does not read at all for a while, then reads in sips.
    a.outer.pause();
    await new Promise((r) => setTimeout(r, 400));
    assert.ok(sent < total, 'the origin was held back by backpressure');
    assert.ok(maxBuffered <= 512 * 1024, `relay buffered up to ${maxBuffered} bytes`);
    let received = 0;
    const ended = once(a.outer, 'end');
    a.outer.on('data', (c: Buffer) => {
      received += c.length;
      a.outer.pause();
      setTimeout(() => a.outer.resume(), 0);
    });
    a.outer.resume();
    await ended;
    assert.equal(received, total);
    assert.ok(maxBuffered <= 512 * 1024, `relay buffered up to ${maxBuffered} bytes`);
    a.outer.end();
    const result = await done;
    assert.equal(result.bytesToClient, total);
  } finally {
    clearInterval(sampler);
    for (const s of [a.outer, a.inner, b.outer, b.inner]) s.destroy();
    a.close();
    b.close();
  }
});

test('an upstream error destroys both sides, resets the client and resolves once with the error', async () => {
  const a = await socketPair();
  const upstream = new Duplex({
    read() {},
    write(_c, _e, cb) {
      cb();
    },
  });
  let settled = 0;
  const done = relay(a.inner, upstream).then((r) => {
    settled++;
    return r;
  });
  // Reset, not ended: a FIN would pass a cut-short download for a whole one.
  const clientReset = once(a.outer, 'error');
  a.outer.resume();
  a.outer.write('x');
  await new Promise((r) => setTimeout(r, 20));
  upstream.destroy(new Error('tunnel broke'));
  const result = await done;
  const [err] = (await clientReset) as [NodeJS.ErrnoException];
  assert.equal(err.code, 'ECONNRESET');
  assert.equal(result.error?.message, 'tunnel broke');
  assert.equal(result.bytesFromClient, 1);
  assert.ok(a.inner.destroyed);
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(settled, 1);
  a.close();
});

test('a client reset destroys the upstream and resolves with an error', async () => {
  const a = await socketPair();
  const b = await socketPair();
  const done = relay(a.inner, b.inner);
  const upstreamEnded = once(b.outer, 'end');
  b.outer.resume();
  a.outer.resetAndDestroy();
  const result: RelayResult = await done;
  assert.ok(result.error);
  // The log's "stream closed with error" says whose reset it was: the upstream's reads the same.
  assert.match(result.error.message, /^the client reset its connection \(read ECONNRESET\)$/);
  assert.ok(b.inner.destroyed);
  await upstreamEnded;
  a.close();
  b.close();
});

test("an upstream socket's reset is not called the client's", async () => {
  const a = await socketPair();
  const b = await socketPair();
  const done = relay(a.inner, b.inner);
  a.outer.resume();
  a.outer.on('error', () => undefined);
  b.outer.resetAndDestroy();
  const result: RelayResult = await done;
  assert.equal(result.error?.message, 'read ECONNRESET');
  a.close();
  b.close();
});

test('works with a non-socket Duplex and writes head before client bytes', async () => {
  const a = await socketPair();
  // An in-memory echo: what is written comes back, the FIN too.
  const echo = echoDuplex();
  const done = relay(a.inner, echo, Buffer.from('first,'));
  const got = collect(a.outer);
  a.outer.end('second');
  assert.equal((await got).toString(), 'first,second');
  const result = await done;
  assert.deepEqual(result, { bytesFromClient: 12, bytesToClient: 12 });
  a.close();
});

test('data from a client whose peer has fully closed tears the relay down', async () => {
  const a = await socketPair();
  // A Duplex that closes both ways as soon as its readable side ends (allowHalfOpen: false).
  const upstream = new Duplex({
    allowHalfOpen: false,
    read() {},
    write(_c, _e, cb) {
      cb();
    },
  });
  const done = relay(a.inner, upstream);
  upstream.push(null);
  await new Promise((r) => setTimeout(r, 20));
  a.outer.write('too late');
  const result = await done;
  assert.ok(result.error);
  a.close();
});

test('an upstream destroyed without an error is a premature close: both sides go, the client reset, the result says so', { timeout: 10_000 }, async () => {
  const a = await socketPair();
  const upstream = new Duplex({
    read() {},
    write(_c, _e, cb) {
      cb();
    },
  });
  const done = relay(a.inner, upstream);
  const clientReset = once(a.outer, 'error');
  a.outer.resume();
  upstream.destroy();
  const result = await done;
  assert.equal(((await clientReset) as [NodeJS.ErrnoException])[0].code, 'ECONNRESET', 'a break, not an end');
  assert.equal((result.error as NodeJS.ErrnoException | undefined)?.code, 'ERR_STREAM_PREMATURE_CLOSE');
  assert.ok(a.inner.destroyed);
  a.close();
});

test('an upstream that failed or closed before the relay started ends the relay at once', { timeout: 10_000 }, async () => {
  for (const waitForClose of [true, false]) {
    const a = await socketPair();
    const upstream = new Duplex({
      read() {},
      write(_c, _e, cb) {
        cb();
      },
    });
    upstream.on('error', () => {});
    upstream.destroy(new Error('gone before we began'));
    // Closed already, or errored with its 'close' still to come.
    if (waitForClose) await new Promise((r) => upstream.on('close', r));
    const result = await relay(a.inner, upstream);
    assert.equal(result.error?.message, 'gone before we began');
    assert.ok(a.inner.destroyed);
    a.close();
  }
});

test('startRelay hands the result to its callback; a callback that throws is logged, not fatal', { timeout: 10_000 }, async () => {
  const a = await socketPair();
  const echo = echoDuplex();
  const logged: string[] = [];
  const log = { error: (_o: unknown, msg: string) => logged.push(msg) } as unknown as Logger;
  const results: RelayResult[] = [];
  startRelay(a.inner, { stream: echo }, undefined, log, (r) => {
    results.push(r);
    throw new Error('stats broke');
  });
  const closed = new Promise((r) => a.inner.on('close', r));
  const got = collect(a.outer);
  a.outer.end('abc');
  assert.equal((await got).toString(), 'abc');
  await closed;
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(results, [{ bytesFromClient: 3, bytesToClient: 3 }]);
  assert.deepEqual(logged, ['recording the end of a stream failed']);
  a.close();
});

test("startRelay's counters move while bytes flow, and StreamStats totals include an open stream's", { timeout: 10_000 }, async () => {
  const a = await socketPair();
  const echo = echoDuplex();
  const stats = new StreamStats(createLogger('silent'));
  const record = stats.opened('socks5', '127.0.0.1:1', { host: 'echo.data', port: 7000, type: 'domain' }, 'test', 'r1');
  let result: RelayResult | undefined;
  record.live = startRelay(a.inner, { stream: echo }, undefined, createLogger('silent'), (r) => {
    result = r;
    stats.closed(record, r.bytesFromClient, r.bytesToClient, r.error);
  });
  let got = 0;
  a.outer.on('data', (d: Buffer) => (got += d.length));
  a.outer.write(Buffer.alloc(100_000));
  while (got < 100_000) await new Promise((r) => setTimeout(r, 5));
  assert.equal(result, undefined, 'still open');
  assert.deepEqual([record.live.bytesFromClient, record.live.bytesToClient], [100_000, 100_000]);
  const open = stats.snapshot();
  assert.deepEqual([open.openStreams, open.bytesFromClients, open.bytesToClients], [1, 100_000, 100_000]);
  assert.deepEqual(stats.forRoute('r1'), { openStreams: 1, totalStreams: 1, bytesFromClients: 100_000, bytesToClients: 100_000 });
  assert.equal(stats.forRoute('r2').bytesToClients, 0, "another route's stream is not counted");
  // Closed: the final counts are added once, not on top of the live ones.
  a.outer.end();
  while (!result) await new Promise((r) => setTimeout(r, 5));
  const done = stats.snapshot();
  assert.deepEqual([done.openStreams, done.bytesFromClients, done.bytesToClients], [0, 100_000, 100_000]);
  a.close();
});

test('a client that reads slowly after its FIN still gets every byte and the FIN: the tear-down clock waits for it', { timeout: 10_000 }, async () => {
  const a = await socketPair();
  const upstream = new Duplex({
    read() {},
    write(_c, _e, cb) {
      cb();
    },
    final(cb) {
      cb();
    },
  });
  const done = relay(a.inner, upstream, undefined, 100);
  a.outer.pause();
  a.outer.end(); // request (none here) then FIN; the answer is read later
  // The pod answers until the relay holds it back for the slow client, then sends its FIN.
  const chunk = Buffer.alloc(64 << 10, 7);
  let sent = 0;
  await new Promise<void>((resolve) => {
    const more = (): void => {
      if (upstream.isPaused() && upstream.readableLength === 0) {
        upstream.push(null);
        return resolve();
      }
      upstream.push(chunk);
      sent += chunk.length;
      setImmediate(more);
    };
    more();
  });
  await new Promise((r) => setTimeout(r, 400)); // four tear-down graces without reading
  const got = collect(a.outer);
  a.outer.resume();
  assert.equal((await got).length, sent);
  const result = await done;
  assert.equal(result.error, undefined);
  assert.equal(result.bytesToClient, sent);
  a.close();
});

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

test('the pieces of one unit leave in one write, held across event-loop turns, not copied', { timeout: 10_000 }, async () => {
  await withSocketPair(async (a) => {
    const upstream = new PiecedUpstream();
    const writes = spyWrites(a.inner);
    const done = relay(a.inner, upstream);
    assert.ok(upstream.piecesAsked, 'the relay asks for pieces');
    const got = collect(a.outer);
    const pieces = [randomBytes(16 * 1024), randomBytes(16 * 1024), randomBytes(100)];
    upstream.piece(pieces[0]!, true);
    await tick();
    upstream.piece(pieces[1]!, true);
    await tick();
    assert.equal(writes.length, 0, 'nothing is sent while the unit is incomplete');
    upstream.piece(pieces[2]!, false);
    await tick();
    // A turn later: in the same turn it would join the unit's write (units of one turn go together),
    // unless the unit filled the socket's buffer first, which depends on Node's default high-water mark.
    const single = randomBytes(300);
    upstream.piece(single, false);
    await tick();
    assert.equal(writes.length, 2);
    // The very buffers the upstream pushed, in one write: no join, no copy.
    assert.equal(writes[0]!.length, 3);
    writes[0]!.forEach((b, i) => assert.equal(b, pieces[i]));
    assert.equal(writes[1]![0], single);
    upstream.push(null);
    a.outer.end();
    assert.equal(sha(await got), sha(Buffer.concat([...pieces, single])));
    assert.equal((await done).error, undefined);
  });
});

test('complete units that arrive in one turn (one socket read of the tunnel) leave in one write', { timeout: 10_000 }, async () => {
  await withSocketPair(async (a) => {
    const upstream = new PiecedUpstream();
    const writes = spyWrites(a.inner);
    const done = relay(a.inner, upstream);
    const got = collect(a.outer);
    const units = [[randomBytes(200), randomBytes(300)], [randomBytes(400)], [randomBytes(100), randomBytes(50)]];
    for (const unit of units) unit.forEach((piece, i) => upstream.piece(piece, i < unit.length - 1));
    await tick();
    assert.equal(writes.length, 1, 'one write for the three units');
    assert.deepEqual(writes[0], units.flat(), 'the very buffers, in order');
    // A unit left incomplete at the end of a turn is still held until its last piece.
    const late = [randomBytes(64), randomBytes(64)];
    upstream.piece(late[0]!, true);
    await tick();
    assert.equal(writes.length, 1, 'nothing sent while the unit is incomplete');
    upstream.piece(late[1]!, false);
    await tick();
    assert.equal(writes.length, 2);
    assert.deepEqual(writes[1], late);
    upstream.push(null);
    a.outer.end();
    assert.equal(sha(await got), sha(Buffer.concat([...units.flat(), ...late])));
    assert.equal((await done).error, undefined);
  });
});

test('a unit still under way when the upstream ends is sent before the FIN', { timeout: 10_000 }, async () => {
  await withSocketPair(async (a) => {
    const upstream = new PiecedUpstream();
    const done = relay(a.inner, upstream);
    const got = collect(a.outer);
    upstream.piece(Buffer.from('half a frame'), true);
    await tick();
    upstream.push(null);
    assert.equal((await got).toString(), 'half a frame');
    a.outer.end();
    assert.equal((await done).error, undefined);
  });
});

test('pieced units to a slow reader: every byte arrives in order, and the relay holds back the upstream', { timeout: 30_000 }, async () => {
  await withSocketPair(async (a) => {
    const upstream = new PiecedUpstream();
    const done = relay(a.inner, upstream);
    const total = 32 * 1024 * 1024;
    const unit = randomBytes(32 * 1024);
    const cuts = [0, 5000, 16 * 1024, 16 * 1024 + 1, 32 * 1024];
    let sent = 0;
    let heldBack = false;
    const produce = (): void => {
      while (sent < total) {
        let accepted = true;
        for (let i = 0; i + 1 < cuts.length; i++) {
          const piece = unit.subarray(cuts[i], cuts[i + 1]);
          if (piece.length > 0) accepted = upstream.piece(piece, i + 2 < cuts.length) && accepted;
        }
        sent += unit.length;
        // The relay paused us: wait for it to read again, as a tunnel would.
        if (!accepted) {
          heldBack = true;
          upstream.onRead = produce;
          return;
        }
      }
      upstream.push(null);
    };
    let maxBuffered = 0;
    const sampler = setInterval(() => (maxBuffered = Math.max(maxBuffered, a.inner.writableLength + upstream.readableLength)), 1);
    let received = 0;
    let mismatch = false;
    a.outer.on('data', (c: Buffer) => {
      for (let i = 0; i < c.length; i++) if (c[i] !== unit[(received + i) % unit.length]) mismatch = true;
      received += c.length;
      a.outer.pause();
      setTimeout(() => a.outer.resume(), 0);
    });
    const ended = once(a.outer, 'end');
    produce();
    await ended;
    clearInterval(sampler);
    // Pauses wait for a unit's end: the client socket holds at most a unit more than its buffer.
    assert.ok(maxBuffered <= 256 * 1024, `relay buffered up to ${maxBuffered} bytes`);
    assert.equal(received, total);
    assert.equal(mismatch, false, 'bytes arrived out of order or changed');
    assert.ok(heldBack, 'the relay paused the upstream for the slow reader');
    a.outer.end();
    assert.equal((await done).bytesToClient, total);
  });
});

test('a client FIN while a unit is held in the cork: the tear-down clock still runs out', { timeout: 10_000 }, async () => {
  await withSocketPair(async (a) => {
    const upstream = new PiecedUpstream();
    const done = relay(a.inner, upstream, undefined, 100);
    a.outer.resume();
    // A piece held in the cork that fills the client socket's buffer (16 KiB on Node 20, 64 KiB
    // from 22): writableNeedDrain stays up however fast the client reads, until the rest of the
    // frame comes, which it never does.
    upstream.piece(randomBytes(a.inner.writableHighWaterMark), true);
    await tick();
    assert.ok(a.inner.writableNeedDrain && a.inner.writableCorked > 0);
    a.outer.end();
    const result = await done;
    assert.equal((result.error as NodeJS.ErrnoException | undefined)?.code, 'ERR_STREAM_PREMATURE_CLOSE');
  });
});

test('through RetryBeforeFirstByte: pieces asked for, also of the stream it moves to, and sent in one write', { timeout: 10_000 }, async () => {
  await withSocketPair(async (a) => {
    const first = new PiecedUpstream();
    const second = new PiecedUpstream();
    const wrapper = new RetryBeforeFirstByte(first, async () => second);
    const writes = spyWrites(a.inner);
    const done = relay(a.inner, wrapper);
    assert.ok(first.piecesAsked);
    // The first endpoint refuses before its first byte: the stream moves, and asks again.
    first.destroy(new ConnectionRefusedError('refused late', { retryable: true }));
    await tick();
    assert.ok(second.piecesAsked, 'the stream moved to was asked for pieces');
    const got = collect(a.outer);
    await tick();
    const pieces = [randomBytes(16 * 1024), randomBytes(5000)];
    second.piece(pieces[0]!, true);
    await tick();
    assert.equal(writes.length, 0);
    second.piece(pieces[1]!, false);
    await tick();
    assert.equal(writes.length, 1);
    writes[0]!.forEach((b, i) => assert.equal(b, pieces[i]));
    second.push(null);
    a.outer.end();
    assert.equal(sha(await got), sha(Buffer.concat(pieces)));
    assert.equal((await done).error, undefined);
  });
});
