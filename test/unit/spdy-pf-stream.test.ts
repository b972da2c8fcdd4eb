// How a port-forward stream hands on DATA frames that reach it in pieces (spdy/frame-pieces.ts):
// to a reader that asked for pieces and keeps up, each piece at once, every piece but a frame's
// last marked as continuing (core/stream-pieces.ts) so the relay sends the frame in one write
// without copying it; to other readers and to one that has fallen behind, the frame joined.
// Either way a run stops at 64 KiB. A tunnel that ends cleanly inside a frame breaks the stream.
// Also: the kubelet's texts and GOAWAYs as the stream's open or end.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { SpdySession } from '../../src/tunnel/spdy/session.js';
import { SpdyPortForwardStream } from '../../src/tunnel/spdy/pf-stream.js';
import { JoinedFrame } from '../../src/tunnel/spdy/frame-pieces.js';
import type { PodTunnel } from '../../src/tunnel/spdy/tunnel.js';
import { HeaderCompressor, encodeHeaderBlock } from '../../src/tunnel/spdy/header-block.js';
import { FrameReader, encodeData, encodeGoAway, encodeSynReply, type Frame } from '../../src/tunnel/spdy/framer.js';
import { createLogger } from '../../src/core/log.js';
import { UpstreamApiError } from '../../src/core/errors.js';

/** The transport's answer when a GOAWAY sends a stream to look for a new tunnel: none came. */
const noTunnel = () => Promise.reject(new UpstreamApiError('port-forward tunnel to ns/p failed: connect ECONNREFUSED', { retryable: true }));

function frames(bufs: Buffer[]): Frame[] {
  const r = new FrameReader();
  for (const b of bufs) r.push(b);
  const out: Frame[] = [];
  for (let f = r.next(); f; f = r.next()) out.push(f);
  return out;
}

const DATA_STREAM = 3; // the error stream is 1, the data stream 3 (openStreams order)

/** The part of a PodTunnel a stream uses, over a bare session; `hold` as the test needs it. */
function fakeTunnel(session: SpdySession, hold: (h: unknown, on: boolean) => unknown = () => {}) {
  let requestIds = 0;
  return {
    session,
    requestId: () => String(requestIds++),
    replies: { opened: () => {}, replied: () => {} },
    hold,
    awaitAnswer: () => false,
    buffered: 0,
    whenDrained: (cb: () => void) => cb(),
    podWentAway: false,
  };
}

/** A stream over a bare client session; `receive` feeds it bytes as the kubelet's side would. */
async function openStream(pieces = true) {
  const session = new SpdySession('client', { write: () => {}, close: () => {} });
  const tunnel = fakeTunnel(session);
  const stream = new SpdyPortForwardStream(tunnel as unknown as PodTunnel, { namespace: 'ns', pod: 'p', port: 80 }, createLogger('silent'), {
    release() {},
    retire() {},
    reopen: noTunnel,
  });
  await stream.open({ signal: new AbortController().signal, confirmMs: 0 });
  stream.on('error', () => {});
  if (pieces) stream.handPiecesOn();
  const headers = new HeaderCompressor();
  session.receive(encodeSynReply(1, headers.compress(encodeHeaderBlock({}))));
  session.receive(encodeSynReply(DATA_STREAM, headers.compress(encodeHeaderBlock({}))));
  return { stream, session, receive: (bytes: Buffer) => session.receive(bytes) };
}

/** Lets a new 'data' listener start the flow (a Readable reads for the first time on the next tick). */
const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Reads `stream` as the relay does, recording each chunk and whether it was marked as continuing. */
async function readPieces(stream: SpdyPortForwardStream): Promise<Array<{ chunk: Buffer; continues: boolean }>> {
  const got: Array<{ chunk: Buffer; continues: boolean }> = [];
  stream.on('data', (chunk: Buffer) => got.push({ chunk, continues: stream.continuesAfter(chunk) }));
  await settle();
  return got;
}

/** A DATA frame's bytes cut at `cuts` (offsets into its payload), header first. */
function cutFrame(payload: Buffer, cuts: number[]): Buffer[] {
  const frame = encodeData(DATA_STREAM, payload, false);
  const at = [0, ...cuts.map((c) => c + 8), frame.length];
  return at.slice(1).map((end, i) => frame.subarray(at[i], end));
}

test("a reader keeping up gets each piece at once, the frame's last unmarked, and no byte copied", async () => {
  const { stream, receive } = await openStream();
  const got = await readPieces(stream);
  const payload = randomBytes(32 * 1024);
  const parts = cutFrame(payload, [10_000, 16 * 1024]);
  for (const part of parts) receive(part);
  assert.deepEqual(
    got.map((g) => [g.chunk.length, g.continues]),
    [
      [10_000, true],
      [16 * 1024 - 10_000, true],
      [16 * 1024, false],
    ],
  );
  // Slices of what the session received, not copies.
  assert.ok(got.every((g, i) => g.chunk.buffer === parts[i]!.buffer));
  assert.deepEqual(Buffer.concat(got.map((g) => g.chunk)), payload);
  // The next frame starts a run of its own.
  got.length = 0;
  receive(encodeData(DATA_STREAM, Buffer.from('whole'), false));
  assert.deepEqual(
    got.map((g) => [g.chunk.toString(), g.continues]),
    [['whole', false]],
  );
  stream.destroy();
});

test('a reader that has fallen behind gets the frame joined, unmarked', async () => {
  const { stream, receive } = await openStream();
  stream.pause();
  const payload = randomBytes(32 * 1024);
  for (const part of cutFrame(payload, [5000, 20_000])) receive(part);
  const got: Array<{ chunk: Buffer; continues: boolean }> = [];
  stream.on('data', (chunk: Buffer) => got.push({ chunk, continues: stream.continuesAfter(chunk) }));
  stream.resume();
  await settle();
  assert.equal(got.length, 1);
  assert.equal(got[0]!.continues, false);
  assert.deepEqual(got[0]!.chunk, payload);
  stream.destroy();
});

test('a run of pieces ends at 64 KiB, whether handed on or joined', async () => {
  const payload = randomBytes(100 * 1024);
  const cuts = Array.from({ length: 9 }, (_, i) => (i + 1) * 10 * 1024); // ten 10 KiB pieces
  {
    const { stream, receive } = await openStream();
    const marks: boolean[] = [];
    stream.on('data', (chunk: Buffer) => marks.push(stream.continuesAfter(chunk)));
    await settle();
    for (const part of cutFrame(payload, cuts)) receive(part);
    // 7 pieces make 70 KiB ≥ 64 KiB: the 7th ends the run; the frame's last ends the next.
    assert.deepEqual(marks, [true, true, true, true, true, true, false, true, true, false]);
    stream.destroy();
  }
  {
    const { stream, receive } = await openStream();
    stream.pause();
    for (const part of cutFrame(payload, cuts)) receive(part);
    const sizes: number[] = [];
    stream.on('data', (chunk: Buffer) => sizes.push(chunk.length));
    stream.resume();
    await settle();
    assert.deepEqual(sizes, [70 * 1024, 30 * 1024]);
    stream.destroy();
  }
});

test('a frame begun piece by piece and finished while the reader is behind: the rest comes joined, the run starts over', async () => {
  const { stream, receive } = await openStream();
  const got = await readPieces(stream);
  const payload = randomBytes(30 * 1024);
  const [p1, p2, p3] = cutFrame(payload, [10 * 1024, 20 * 1024]);
  receive(p1!);
  stream.pause();
  receive(p2!);
  receive(p3!);
  stream.resume();
  await settle();
  assert.deepEqual(
    got.map((g) => [g.chunk.length, g.continues]),
    [
      [10 * 1024, true],
      [20 * 1024, false],
    ],
  );
  assert.deepEqual(Buffer.concat(got.map((g) => g.chunk)), payload);
  got.length = 0;
  const next = randomBytes(40 * 1024);
  for (const part of cutFrame(next, [20 * 1024])) receive(part);
  assert.deepEqual(
    got.map((g) => [g.chunk.length, g.continues]),
    [
      [20 * 1024, true],
      [20 * 1024, false],
    ],
  );
  stream.destroy();
});

test('a reader that did not ask for pieces gets whole frames, though it keeps up', async () => {
  const { stream, receive } = await openStream(false);
  const got = await readPieces(stream);
  const payload = randomBytes(32 * 1024);
  for (const part of cutFrame(payload, [10_000, 16 * 1024])) receive(part);
  assert.equal(got.length, 1);
  assert.equal(got[0]!.continues, false);
  assert.deepEqual(got[0]!.chunk, payload);
  stream.destroy();
});

test('a tunnel that ends cleanly inside a DATA frame breaks the stream; between frames it ends it', async () => {
  for (const inside of [true, false]) {
    const { stream, session, receive } = await openStream();
    const got: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => got.push(chunk));
    await settle();
    const payload = randomBytes(32 * 1024);
    const parts = cutFrame(payload, [16 * 1024]);
    receive(parts[0]!);
    if (!inside) receive(parts[1]!);
    const outcome = new Promise<string>((resolve) => {
      stream.on('end', () => resolve('end'));
      stream.on('error', (err) => resolve(`error: ${err.message}`));
    });
    session.destroy(); // the WebSocket closed with 1000: no error
    const result = await outcome;
    if (inside) assert.match(result, /^error: .*closed in the middle of a DATA frame/);
    else assert.equal(result, 'end');
    stream.destroy();
  }
});

test("a frame read as one message (the kubelet's error text) is joined from its pieces, cut at its cap; the next starts afresh", () => {
  const joined = new JoinedFrame(10);
  assert.equal(joined.add(Buffer.from('abc'), false), undefined);
  assert.equal(joined.add(Buffer.from('defghijkl'), false), undefined);
  assert.equal(joined.add(Buffer.from('mno'), true)?.toString(), 'abcdefghij');
  assert.equal(joined.add(Buffer.from('x'), true)?.toString(), 'x');
});

test('a stream whose pod has ended releases its hold on the tunnel, however slowly its client reads', async () => {
  const session = new SpdySession('client', { write: () => {}, close: () => {} });
  const holders = new Set<unknown>();
  const tunnel = fakeTunnel(session, (h, on) => (on ? holders.add(h) : holders.delete(h)));
  const stream = new SpdyPortForwardStream(tunnel as unknown as PodTunnel, { namespace: 'ns', pod: 'p', port: 80 }, createLogger('silent'), {
    release() {},
    retire() {},
    reopen: noTunnel,
  });
  await stream.open({ signal: new AbortController().signal, confirmMs: 0 });
  const headers = new HeaderCompressor();
  session.receive(encodeSynReply(1, headers.compress(encodeHeaderBlock({}))));
  session.receive(encodeSynReply(DATA_STREAM, headers.compress(encodeHeaderBlock({}))));
  stream.pause();
  // 1.25 MiB and the pod's FIN in one socket chunk: more than a stream may queue, so it holds the tunnel.
  const frames: Buffer[] = [];
  for (let i = 0; i < 40; i++) frames.push(encodeData(DATA_STREAM, Buffer.alloc(32 * 1024, 1), false));
  frames.push(encodeData(DATA_STREAM, Buffer.alloc(0), true));
  session.receive(Buffer.concat(frames));
  assert.equal(holders.size, 0, 'the pod ended: nothing more comes for this stream, the other streams must go on');
  // The kubelet closes the error stream without a word: a clean end.
  session.receive(encodeData(1, Buffer.alloc(0), true));
  let got = 0;
  stream.on('data', (c: Buffer) => (got += c.length));
  const ended = new Promise((r) => stream.once('end', r));
  stream.resume();
  await ended;
  assert.equal(got, 40 * 32 * 1024, 'every byte still reaches the reader');
  stream.destroy();
});

test('"sandbox not found" on a port not yet confirmed fails the open with the kubelet\'s text (host unreachable), then retires the tunnel', async () => {
  const session = new SpdySession('client', { write: () => {}, close: () => {} });
  let retired = false;
  const tunnel = fakeTunnel(session);
  // Retiring closes the session, as SpdyTransport's shutdown does.
  const stream = new SpdyPortForwardStream(tunnel as unknown as PodTunnel, { namespace: 'ns', pod: 'p', port: 80 }, createLogger('silent'), {
    release() {},
    retire() {
      retired = true;
      session.destroy();
    },
    reopen: noTunnel,
  });
  const opened = stream.open({ signal: new AbortController().signal, confirmMs: 150 });
  const headers = new HeaderCompressor();
  session.receive(encodeSynReply(1, headers.compress(encodeHeaderBlock({}))));
  session.receive(encodeSynReply(DATA_STREAM, headers.compress(encodeHeaderBlock({}))));
  session.receive(encodeData(1, Buffer.from('error forwarding port 80 to pod p, uid u: failed to find sandbox "abc" in store: not found'), false));
  await assert.rejects(opened, (err: Error & { socksReply?: number }) => err.socksReply === 0x04 && /sandbox/.test(err.message));
  assert.equal(retired, true);
});

test("a GOAWAY that crossed the pair's SYN_STREAMs, and no new tunnel comes: the open fails at once, or the stream called connected fails, retryable; the kubelet is sent nothing for streams it never took", async () => {
  const out: Buffer[] = [];
  const session = new SpdySession('client', { write: (b) => out.push(b), close: () => {} });
  const tunnel = fakeTunnel(session);
  const asked: string[] = [];
  const reopen = (target: { pod: string }) => {
    asked.push(target.pod);
    return noTunnel();
  };
  const make = () =>
    new SpdyPortForwardStream(tunnel as unknown as PodTunnel, { namespace: 'ns', pod: 'p', port: 80 }, createLogger('silent'), {
      release() {},
      retire() {},
      reopen,
    });
  const headers = new HeaderCompressor();
  // Streams 1+3: taken and replied to. 5+7: called connected (a warm port). 9+11: still opening (a cold port).
  const taken = make();
  await taken.open({ signal: new AbortController().signal, confirmMs: 0 });
  session.receive(encodeSynReply(1, headers.compress(encodeHeaderBlock({}))));
  session.receive(encodeSynReply(3, headers.compress(encodeHeaderBlock({}))));
  const warm = make();
  await warm.open({ signal: new AbortController().signal, confirmMs: 0 });
  const warmError = new Promise<Error>((r) => warm.once('error', r));
  const cold = make().open({ signal: AbortSignal.timeout(60_000), confirmMs: 150 });
  const sentBefore = out.length;
  // The kubelet took the error stream of the warm pair (5), not its data stream (7).
  session.receive(encodeGoAway(5));
  await assert.rejects(cold, (err: UpstreamApiError) => err.retryable && /ECONNREFUSED/.test(err.message));
  const err = (await warmError) as UpstreamApiError;
  assert.ok(err.retryable && /ECONNREFUSED/.test(err.message), String(err));
  assert.deepEqual(asked, ['p', 'p'], 'each stream the GOAWAY left out asked for a new tunnel to its pod, once');
  const resets = frames(out.slice(sentBefore))
    .filter((f) => f.type === 'rst_stream')
    .map((f) => f.streamId);
  assert.deepEqual(resets, [5], 'only the error stream the kubelet took is reset');
  assert.equal(taken.destroyed, false);
});

test('a tunnel closed because its pod was deleted, before the kubelet took a warm stream that wrote: the stream fails retryable (another endpoint may take it); once taken, it broke', async () => {
  for (const repliesIn of [0, 2]) {
    const session = new SpdySession('client', { write: () => {}, close: () => {} });
    const tunnel = fakeTunnel(session);
    const stream = new SpdyPortForwardStream(tunnel as unknown as PodTunnel, { namespace: 'ns', pod: 'p', port: 80 }, createLogger('silent'), {
      release() {},
      retire() {},
      reopen: noTunnel,
    });
    // A port that accepted lately: called connected at once; the client writes its request.
    await stream.open({ signal: new AbortController().signal, confirmMs: 0 });
    stream.on('error', () => {});
    stream.write('GET / HTTP/1.1\r\n\r\n');
    const headers = new HeaderCompressor();
    if (repliesIn === 2) {
      session.receive(encodeSynReply(1, headers.compress(encodeHeaderBlock({}))));
      session.receive(encodeSynReply(DATA_STREAM, headers.compress(encodeHeaderBlock({}))));
    }
    // The pool retires the tunnel as the cache sees the pod deleted (spdy-transport.ts podGone).
    tunnel.podWentAway = true;
    session.destroy(new Error('the port-forward tunnel to ns/p was closed: the pod is gone'));
    await settle();
    const err = stream.errored as UpstreamApiError;
    assert.ok(err instanceof UpstreamApiError);
    if (repliesIn === 0) {
      assert.equal(err.retryable, true);
      assert.match(err.message, /the pod went away before the kubelet took the stream/);
    } else {
      assert.equal(err.retryable, false, 'the kubelet had the pair: what was written may have reached the pod');
      assert.match(err.message, /broke: the port-forward tunnel to ns\/p was closed: the pod is gone/);
    }
  }
});
