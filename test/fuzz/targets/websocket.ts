// Fuzz target: the client side of the SPDY tunnel's WebSocket (src/tunnel/websocket/
// {frame-reader,byte-socket}.ts) fed what an API server or a front might send after its 101.
// The reader must throw nothing but WebSocketProtocolError, and agree with ws's own Receiver (the
// reference, in client mode): what ws takes we take, byte for byte (text messages aside: a text
// message on the tunnel's byte stream is refused on purpose); what we refuse, ws refuses too.
// ByteWebSocket must never let an error out of its socket's 'data' handler, must end exactly
// once, and after its end write nothing. The first input byte picks how the bytes are chunked.
import { EventEmitter } from 'node:events';
import type net from 'node:net';
import * as wsLib from 'ws';
import { CloseCode, FrameReader, WebSocketProtocolError } from '../../../src/tunnel/websocket/frame-reader.js';
import { ByteWebSocket, type WebSocketEnd } from '../../../src/tunnel/websocket/byte-socket.js';
import type { FuzzTarget } from '../engine.js';

const CHUNKS = [1, 2, 3, 7, 16, 125, Infinity];

interface WsReceiver extends EventEmitter {
  write(chunk: Buffer): void;
}
// ws's ESM entry exports its Receiver by name (@types/ws does not declare it).
const { Receiver } = wsLib as unknown as { Receiver: new (o: { isServer: boolean; binaryType: string; maxPayload: number }) => WsReceiver };

class Invariant extends Error {}

function check(cond: boolean, what: string): void {
  if (!cond) throw new Invariant(what);
}

/** What ws's Receiver makes of `data` in client mode: binary bytes, whether a text message came, and its error. */
async function reference(data: Buffer): Promise<{ binary: Buffer; text: boolean; error?: Error; closed: boolean }> {
  const r = new Receiver({ binaryType: 'nodebuffer', isServer: false, maxPayload: 0 });
  const parts: Buffer[] = [];
  let text = false;
  let error: Error | undefined;
  let closed = false;
  r.on('message', (m: Buffer, isBinary: boolean) => (isBinary ? parts.push(m) : (text = true)));
  r.on('ping', () => undefined);
  r.on('pong', () => undefined);
  r.on('conclude', () => (closed = true));
  r.on('error', (err: Error) => (error ??= err));
  r.write(data);
  await new Promise((resolve) => setImmediate(resolve));
  return { binary: Buffer.concat(parts), text, error, closed };
}

/** A socket stand-in: what ByteWebSocket calls, recording writes. */
class FakeSocket extends EventEmitter {
  destroyed = false;
  writable = true;
  writableLength = 0;
  writes = 0;
  private paused = false;
  setNoDelay(): void {}
  unshift(): void {}
  isPaused(): boolean {
    return this.paused;
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
  write(_b: Buffer, cb?: () => void): boolean {
    check(!this.destroyed && this.writable, 'a write after the socket was destroyed or ended');
    this.writes++;
    if (cb) queueMicrotask(cb);
    return true;
  }
  end(): void {
    this.writable = false;
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.writable = false;
    queueMicrotask(() => this.emit('close'));
  }
}

export const webSocketTarget: FuzzTarget = {
  name: 'websocket',
  maxLen: 2048,
  dictionary: [
    [0x82, 0x00],
    [0x02, 0x01],
    [0x80, 0x00],
    [0x88, 0x02, 0x03, 0xe8],
    [0x88, 0x00],
    [0x89, 0x00],
    [0x8a, 0x00],
    [0x81, 0x00],
    [0x7e, 0x00, 0x10],
    [0x7f, 0, 0, 0, 0, 0, 0, 0x01, 0x00],
    [0x7d],
  ].map((a) => Buffer.from(a)),
  include: (url) => url.includes('/dist/src/tunnel/websocket/'),
  async run(input) {
    if (input.length === 0) return;
    const chunk = CHUNKS[input[0]! % CHUNKS.length]!;
    const data = input.subarray(1);

    // The reader against the reference.
    const got: Buffer[] = [];
    let refused: unknown;
    let closed = false;
    const reader = new FrameReader({
      binary: (piece) => {
        check(piece.length > 0, 'an empty binary piece');
        check(!closed, 'binary payload after the close frame');
        got.push(Buffer.from(piece));
      },
      ping: (p) => check(p.length <= 125, 'a ping longer than 125 bytes'),
      pong: (p) => check(p.length <= 125, 'a pong longer than 125 bytes'),
      close: () => {
        check(!closed, 'two close frames read');
        closed = true;
      },
    });
    for (let off = 0; off < data.length && refused === undefined; off += chunk) {
      try {
        reader.push(data.subarray(off, Math.min(data.length, off + chunk)));
      } catch (err) {
        if (!(err instanceof WebSocketProtocolError)) throw err;
        refused = err;
      }
    }
    const ours = Buffer.concat(got);
    const ref = await reference(data);
    // A text message is refused at its first frame, on purpose (ws takes it once complete).
    const text = ref.text || (refused instanceof WebSocketProtocolError && refused.closeCode === CloseCode.UNSUPPORTED_DATA);
    if (!text && !ref.error) {
      check(refused === undefined, `refused what ws takes: ${String(refused)}`);
      // ws hands out whole messages; we hand out pieces as they come, so we may be ahead by a partial one.
      check(ours.subarray(0, ref.binary.length).equals(ref.binary), 'binary payload differs from ws');
    }
    // Judged at a frame boundary only: inside a header we may not have read what ws refused yet.
    // Leniencies of ours, harmless: a close reason that is not UTF-8, and a control frame's length
    // in the 16- or 64-bit form (ws refuses the form; we refuse what it says past 125 bytes).
    const state = reader as unknown as { headerHave: number; left: number };
    const atBoundary = state.headerHave === 0 && state.left < 0;
    if (refused === undefined && atBoundary && !closed && ref.error && !text && !/UTF-8|reason|invalid payload length 12[67]$/i.test(ref.error.message))
      check(false, `took what ws refuses: ${ref.error.message}`);

    // ByteWebSocket on a socket: nothing escapes, one end, no write after the socket is gone.
    const socket = new FakeSocket();
    const ws = new ByteWebSocket(socket as unknown as net.Socket, Buffer.alloc(0), 'zero');
    let ends = 0;
    ws.onClose((_end: WebSocketEnd) => ends++);
    for (let off = 0; off < data.length; off += chunk) socket.emit('data', data.subarray(off, Math.min(data.length, off + chunk)));
    check(ends <= 1, `ended ${ends} times`);
    ws.terminate();
    await new Promise((resolve) => setImmediate(resolve));
    check(ends === 1, `ended ${ends} times after terminate`);
  },
};

/** Byte streams a server plausibly sends after its 101, for the corpus. */
export function webSocketSeeds(): Buffer[] {
  const frame = (b0: number, payload: Buffer) => {
    const n = payload.length;
    const head = n < 126 ? Buffer.from([b0, n]) : Buffer.from([b0, 126, n >> 8, n & 0xff]);
    return Buffer.concat([head, payload]);
  };
  const seeds = [
    Buffer.concat([frame(0x82, Buffer.from('spdy bytes')), frame(0x82, Buffer.alloc(300, 7))]),
    Buffer.concat([frame(0x02, Buffer.from('first ')), frame(0x89, Buffer.from('ping')), frame(0x80, Buffer.from('last'))]),
    Buffer.concat([frame(0x82, Buffer.from('bye')), frame(0x88, Buffer.from([0x03, 0xe8, 0x6f, 0x6b]))]),
    Buffer.concat([frame(0x8a, Buffer.alloc(0)), frame(0x88, Buffer.alloc(0)), frame(0x82, Buffer.from('after'))]),
    Buffer.concat([frame(0x81, Buffer.from('text')), frame(0x82, Buffer.from('x'))]),
  ];
  return seeds.map((s, i) => Buffer.concat([Buffer.from([i]), s]));
}
