// A SPDY port-forward stream whose SYN_STREAMs crossed the kubelet's GOAWAY (spdy/goaway-replay.ts):
// it opens its pair again on a new tunnel to the same pod and writes there what the client had
// written, FIN too — kept only until the kubelet replied to both SYN_STREAMs, at most
// MAX_REPLAY_BYTES, at most MAX_MOVES times; then the stream fails, retryable. First the replay on
// its own (a stand-in stream and transport), then SpdyPortForwardStream over client sessions the
// test feeds as the kubelet would.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GoAwayReplay, MAX_MOVES, type PairOwner } from '../../src/tunnel/spdy/goaway-replay.js';
import { SpdyPortForwardStream } from '../../src/tunnel/spdy/pf-stream.js';
import type { PodStreamHooks, TunnelSlot } from '../../src/tunnel/spdy/tunnel-slot.js';
import { SpdySession, type SpdyStream } from '../../src/tunnel/spdy/session.js';
import type { PodTunnel } from '../../src/tunnel/spdy/tunnel.js';
import { HeaderCompressor, encodeHeaderBlock } from '../../src/tunnel/spdy/header-block.js';
import { FrameReader, encodeData, encodeGoAway, encodeSynReply, type Frame } from '../../src/tunnel/spdy/framer.js';
import { ProxyError, UpstreamApiError } from '../../src/core/errors.js';
import { createLogger } from '../../src/core/log.js';
import type { PodPort } from '../../src/tunnel/transport.js';

const target: PodPort = { namespace: 'ns', pod: 'p', port: 80 };
const tick = () => new Promise((r) => setImmediate(r));
const goAwayError = () =>
  new UpstreamApiError('port-forward to ns/p:80: the kubelet closed the tunnel (GOAWAY) before it took the stream', { retryable: true });

/** A data stream as the replay sees it: what was written on it, and whether it was ended. */
class DataStand {
  readonly written: Buffer[] = [];
  ended = false;
  write(chunk: Buffer): boolean {
    this.written.push(chunk);
    return true;
  }
  end(): void {
    this.ended = true;
  }
}

/** A stream as the replay sees it, with a transport that hands out the slots it is given. */
function owner(slots: Array<TunnelSlot | Error>) {
  const o = {
    destroyed: false,
    failedWith: undefined as ProxyError | undefined,
    adopted: [] as TunnelSlot[],
    data: [] as DataStand[],
    asked: [] as AbortSignal[],
    released: 0,
    adopt(slot: TunnelSlot) {
      o.adopted.push(slot);
      const data = new DataStand();
      o.data.push(data);
      return data as unknown as SpdyStream;
    },
    failStream(err: ProxyError) {
      o.failedWith = err;
    },
    afterWrite(callback: () => void) {
      callback();
    },
  };
  const hooks: PodStreamHooks = {
    release: () => o.released++,
    retire: () => undefined,
    reopen: async (_t, signal) => {
      o.asked.push(signal);
      const next = slots.shift();
      if (!next) throw new Error('no more slots');
      if (next instanceof Error) throw next;
      return next;
    },
  };
  return { o: o as typeof o & PairOwner, hooks };
}

const slot = (name: string, released: string[] = []): TunnelSlot => ({
  tunnel: { name } as unknown as PodTunnel,
  hooks: { release: () => released.push(name), retire: () => undefined, reopen: () => Promise.reject(new Error('unused')) },
});

test("the replay: what was written, and FIN, goes on the new pair's data stream — the chunks themselves, not copies", async () => {
  const replay = new GoAwayReplay();
  const a = Buffer.from('GET / HTTP/1.1\r\n');
  const b = Buffer.from('\r\n');
  assert.equal(
    replay.keep(a, () => assert.fail('no move: not held')),
    false,
  );
  replay.keep(b, () => undefined);
  replay.keepFin();
  assert.equal(replay.keptBytes, a.length + b.length);
  const { o, hooks } = owner([slot('t2')]);
  replay.move(o, hooks, target, goAwayError());
  assert.equal(replay.moving, true);
  await tick();
  assert.equal(o.adopted.length, 1);
  assert.equal(o.data[0]!.written.length, 2);
  assert.ok(o.data[0]!.written[0] === a && o.data[0]!.written[1] === b, 'the same buffers');
  assert.equal(o.data[0]!.ended, true, 'FIN replayed');
  assert.equal(replay.moving, false);
  assert.equal(o.failedWith, undefined);
  assert.equal(replay.keptBytes, a.length + b.length, 'still kept: the new pair may be turned away too');
});

test('the replay: past the cap nothing is kept, and a GOAWAY fails the stream without asking for a tunnel', () => {
  const replay = new GoAwayReplay(100);
  replay.keep(Buffer.alloc(60), () => undefined);
  replay.keep(Buffer.alloc(40), () => undefined);
  assert.equal(replay.keptBytes, 100, 'up to the cap: kept');
  replay.keep(Buffer.alloc(1), () => undefined);
  assert.equal(replay.keptBytes, 0, 'past it: nothing (the chunks are let go)');
  replay.keep(Buffer.alloc(1), () => undefined);
  assert.equal(replay.keptBytes, 0, 'and nothing later either');
  const { o, hooks } = owner([slot('t2')]);
  const err = goAwayError();
  replay.move(o, hooks, target, err);
  assert.equal(o.failedWith, err);
  assert.equal(o.asked.length, 0);
});

test(`the replay: at most ${MAX_MOVES} moves, then the stream fails with the GOAWAY error`, async () => {
  const replay = new GoAwayReplay();
  replay.keep(Buffer.from('x'), () => undefined);
  const { o, hooks } = owner([slot('t2'), slot('t3'), slot('t4')]);
  for (let i = 0; i < MAX_MOVES; i++) {
    replay.move(o, hooks, target, goAwayError());
    await tick();
    assert.equal(o.failedWith, undefined);
  }
  assert.equal(o.adopted.length, MAX_MOVES);
  const err = goAwayError();
  replay.move(o, hooks, target, err);
  await tick();
  assert.equal(o.failedWith, err);
  assert.equal(o.asked.length, MAX_MOVES, 'no third tunnel asked for');
  assert.ok(o.data.every((d) => d.written.toString() === 'x'));
});

test('the replay: a write during a move waits for the new pair; one past the cap fails the move and gives the new slot back', async () => {
  const replay = new GoAwayReplay(10);
  replay.keep(Buffer.from('12345'), () => undefined);
  const { o, hooks } = owner([slot('t2')]);
  replay.move(o, hooks, target, goAwayError());
  let called = false;
  assert.equal(
    replay.keep(Buffer.from('678'), () => (called = true)),
    true,
    'held',
  );
  assert.equal(called, false);
  await tick();
  assert.equal(called, true, 'called back once written on the new pair');
  assert.equal(Buffer.concat(o.data[0]!.written).toString(), '12345678');

  const over = new GoAwayReplay(10);
  over.keep(Buffer.from('12345'), () => undefined);
  const released: string[] = [];
  const two = owner([slot('t2', released)]);
  const err = goAwayError();
  over.move(two.o, two.hooks, target, err);
  over.keep(Buffer.from('678901'), () => undefined);
  await tick();
  assert.equal(two.o.failedWith, err);
  assert.deepEqual(released, ['t2'], 'the slot taken for it is given back');
  assert.equal(two.o.adopted.length, 0);
});

test('the replay: a stream gone during its move aborts the tunnel asked for, gives back a slot that comes anyway, lets its held write go', async () => {
  const replay = new GoAwayReplay();
  const released: string[] = [];
  const { o, hooks } = owner([slot('t2', released)]);
  replay.move(o, hooks, target, goAwayError());
  let called = false;
  replay.keep(Buffer.from('x'), () => (called = true));
  o.destroyed = true;
  replay.abandon();
  assert.equal(o.asked[0]!.aborted, true);
  assert.equal(called, true);
  await tick();
  assert.deepEqual(released, ['t2']);
  assert.equal(o.adopted.length, 0);
});

test("the replay: no tunnel came — the stream fails with the tunnel's own error", async () => {
  const replay = new GoAwayReplay();
  const refused = new UpstreamApiError('port-forward tunnel to ns/p refused by the API server (500)', { retryable: true });
  const { o, hooks } = owner([refused]);
  replay.move(o, hooks, target, goAwayError());
  await tick();
  assert.equal(o.failedWith, refused);
});

// ---- SpdyPortForwardStream over client sessions ----

/** A tunnel as the stream sees it: a client session whose output is kept, fed as the kubelet would. */
class TestTunnel {
  readonly out: Buffer[] = [];
  readonly session = new SpdySession('client', { write: (b) => this.out.push(b), close: () => undefined });
  readonly buffered = 0;
  readonly replies = { opened: () => undefined, replied: () => undefined };
  released = 0;
  private ids = 0;
  private readonly peer = new HeaderCompressor();
  readonly hooks: PodStreamHooks;

  constructor(next: () => Promise<TunnelSlot>) {
    this.hooks = { release: () => this.released++, retire: () => undefined, reopen: () => next() };
  }

  get slot(): TunnelSlot {
    return { tunnel: this as unknown as PodTunnel, hooks: this.hooks };
  }

  requestId(): string {
    return String(this.ids++);
  }
  hold(): void {}
  awaitAnswer(): boolean {
    return false;
  }
  whenDrained(cb: () => void): void {
    cb();
  }

  reply(id: number): void {
    this.session.receive(encodeSynReply(id, this.peer.compress(encodeHeaderBlock({}))));
  }

  frames(): Frame[] {
    const r = new FrameReader();
    for (const b of this.out) r.push(b);
    const out: Frame[] = [];
    for (let f = r.next(); f; f = r.next()) out.push(f);
    return out;
  }

  /** What went out on stream `id`: SYN_STREAM, DATA payload, FIN, RST. */
  sentOn(id: number): string[] {
    return this.frames()
      .filter((f) => 'streamId' in f && f.streamId === id)
      .map((f) => {
        if (f.type === 'data') return f.data.length > 0 ? `data:${f.data.toString()}` : f.fin ? 'fin' : 'data:';
        return f.type;
      });
  }
}

/** Tunnels handed out in turn by the hooks' reopen; `asked` counts the requests. */
function tunnels(n: number) {
  const list: TestTunnel[] = [];
  let asked = 0;
  const next = async (): Promise<TunnelSlot> => {
    asked++;
    const t = list[asked];
    if (!t) throw new UpstreamApiError('no tunnel', { retryable: true });
    return t.slot;
  };
  for (let i = 0; i < n; i++) list.push(new TestTunnel(next));
  return { list, asked: () => asked };
}

function stream(t: TestTunnel): SpdyPortForwardStream {
  const s = new SpdyPortForwardStream(t as unknown as PodTunnel, target, createLogger('silent'), t.hooks);
  s.on('error', () => undefined);
  return s;
}

const warm = { signal: AbortSignal.timeout(60_000), confirmMs: 0 };

test('a stream keeps what it writes only until the kubelet replied to both SYN_STREAMs', async () => {
  const {
    list: [t],
  } = tunnels(1);
  const s = stream(t!);
  await s.open(warm);
  s.write('hello');
  await tick();
  assert.equal(s.keptForReplay, 5);
  t!.reply(1);
  s.write(' world');
  await tick();
  assert.equal(s.keptForReplay, 11, 'one reply: the data stream may still be turned away');
  t!.reply(3);
  assert.equal(s.keptForReplay, 0, 'both replies: let go');
  s.write('!');
  await tick();
  assert.equal(s.keptForReplay, 0, 'and nothing kept after them');
  assert.deepEqual(t!.sentOn(3), ['syn_stream', 'data:hello', 'data: world', 'data:!']);
  s.destroy();
});

test('a warm stream a GOAWAY left out opens again on a new tunnel: what the client wrote and its FIN go there, the pod answers there, the old slot is given back', async () => {
  const {
    list: [t1, t2],
    asked,
  } = tunnels(2);
  const s = stream(t1!);
  await s.open(warm);
  s.write('GET / HTTP/1.1\r\n\r\n');
  s.end();
  await tick();
  t1!.reply(1); // the kubelet took the error stream, not the data stream
  t1!.session.receive(encodeGoAway(1));
  await tick();
  assert.equal(asked(), 1);
  assert.equal(t1!.released, 1, "the old tunnel's slot given back");
  assert.deepEqual(t1!.sentOn(1), ['syn_stream', 'fin', 'rst_stream'], 'the stream the kubelet took is reset');
  assert.deepEqual(t1!.sentOn(3), ['syn_stream', 'data:GET / HTTP/1.1\r\n\r\n', 'fin'], 'nothing more for the one it never took');
  assert.deepEqual(t2!.sentOn(1), ['syn_stream', 'fin']);
  assert.deepEqual(t2!.sentOn(3), ['syn_stream', 'data:GET / HTTP/1.1\r\n\r\n', 'fin'], 'bytes and FIN written again');
  let answer = '';
  s.on('data', (d: Buffer) => (answer += d));
  t2!.reply(1);
  t2!.reply(3);
  assert.equal(s.keptForReplay, 0);
  t2!.session.receive(encodeData(3, Buffer.from('HTTP/1.1 200 OK\r\n\r\n'), true));
  await tick();
  assert.equal(answer, 'HTTP/1.1 200 OK\r\n\r\n');
  s.destroy();
  assert.equal(t2!.released, 1);
  assert.equal(t1!.released, 1, 'released once');
});

test("a cold stream still waiting for its replies moves too, and opens on the new tunnel's replies", async () => {
  const {
    list: [t1, t2],
  } = tunnels(2);
  const s = stream(t1!);
  let opened = false;
  const open = s.open({ signal: AbortSignal.timeout(60_000), confirmMs: 10 }).then(() => (opened = true));
  await tick();
  t1!.session.receive(encodeGoAway(0));
  await tick();
  assert.deepEqual(t2!.sentOn(1), ['syn_stream', 'fin']);
  assert.deepEqual(t2!.sentOn(3), ['syn_stream']);
  assert.equal(opened, false);
  t2!.reply(1);
  t2!.reply(3);
  await open;
  s.destroy();
});

test("a tunnel that takes no more streams (the kubelet's GOAWAY came first) sends the opening stream to a new one; one that is closed, or that we sent GOAWAY on, fails it retryable without asking", async () => {
  const {
    list: [t1, t2],
    asked,
  } = tunnels(2);
  t1!.session.receive(encodeGoAway(0));
  const s = stream(t1!);
  await s.open(warm);
  assert.equal(asked(), 1);
  assert.deepEqual(t1!.frames(), [], 'nothing sent on the tunnel going away');
  assert.deepEqual(t2!.sentOn(3), ['syn_stream']);
  s.destroy();

  for (const end of ['closed', 'our GOAWAY'] as const) {
    const {
      list: [t],
      asked: askedHere,
    } = tunnels(2);
    if (end === 'closed') t!.session.destroy();
    else t!.session.goAway();
    await assert.rejects(stream(t!).open(warm), (err: ProxyError) => err.retryable && /SPDY session is (closed|going away)/.test(err.message), end);
    assert.equal(askedHere(), 0, `${end}: not a GOAWAY of the kubelet's; another endpoint may take it`);
    assert.equal(t!.released, 1);
  }
});

test(`a kubelet that goes away on every new tunnel: the stream opens again ${MAX_MOVES} times, then fails retryable`, async () => {
  const { list, asked } = tunnels(MAX_MOVES + 2);
  const s = stream(list[0]!);
  await s.open(warm);
  s.write('hello');
  await tick();
  const failed = new Promise<ProxyError>((r) => s.once('error', r));
  for (let i = 0; i <= MAX_MOVES; i++) {
    list[i]!.session.receive(encodeGoAway(0));
    await tick();
  }
  const err = await failed;
  assert.ok(err.retryable && /GOAWAY/.test(err.message), String(err));
  assert.equal(asked(), MAX_MOVES);
  for (let i = 1; i <= MAX_MOVES; i++) assert.deepEqual(list[i]!.sentOn(3), ['syn_stream', 'data:hello'], `tunnel ${i}`);
  assert.ok(
    list.every((t, i) => t.released === (i <= MAX_MOVES ? 1 : 0)),
    'each slot taken given back once',
  );
});
