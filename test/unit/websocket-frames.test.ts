// Our WebSocket framing (src/tunnel/websocket) checked against `ws` as an independent
// implementation: `ws`'s server-side Sender writes the frames our reader parses, `ws`'s server-side
// Receiver reads the frames our writer builds. Byte streams are cut at every position, and each
// rule of RFC 6455 the reader enforces is broken once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import * as wsLib from 'ws';
import { FrameReader, Opcode, WebSocketProtocolError, type FrameSink } from '../../src/tunnel/websocket/frame-reader.js';
import { encodeClientFrame, maskInPlace } from '../../src/tunnel/websocket/frame-writer.js';

interface WsSender {
  frame(data: Buffer, options: { fin: boolean; opcode: number; mask: boolean; readOnly: boolean; rsv1: boolean }): Buffer[];
}
interface WsReceiver {
  on(event: 'message', cb: (data: Buffer, isBinary: boolean) => void): void;
  on(event: 'ping' | 'pong', cb: (data: Buffer) => void): void;
  on(event: 'conclude', cb: (code: number, reason: Buffer) => void): void;
  on(event: 'error', cb: (err: Error) => void): void;
  write(chunk: Buffer): void;
}
// ws's ESM entry exports its Sender and Receiver by name (@types/ws does not declare them).
const { Sender, Receiver } = wsLib as unknown as { Sender: WsSender; Receiver: new (o: { isServer: boolean; binaryType: string }) => WsReceiver };

/** A server frame as `ws` writes it (unmasked). */
const serverFrame = (opcode: number, data: Buffer, fin = true): Buffer =>
  Buffer.concat(Sender.frame(data, { fin, opcode, mask: false, readOnly: false, rsv1: false }));

interface Seen {
  binary: Buffer[];
  events: string[];
}

function reader(): { r: FrameReader; seen: Seen } {
  const seen: Seen = { binary: [], events: [] };
  const sink: FrameSink = {
    binary: (p) => {
      assert.ok(p.length > 0, 'pieces are never empty');
      seen.binary.push(p);
    },
    ping: (p) => seen.events.push(`ping:${p.toString()}`),
    pong: (p) => seen.events.push(`pong:${p.toString()}`),
    close: (code, reason) => seen.events.push(`close:${code ?? 'none'}:${reason}`),
  };
  return { r: new FrameReader(sink), seen };
}

test('binary payload comes out whole and in order, however the stream is cut, control frames between fragments', () => {
  const a = randomBytes(70_000); // 64-bit length
  const b = randomBytes(300); // 16-bit length
  const c = randomBytes(5); // 7-bit length
  const stream = Buffer.concat([
    serverFrame(Opcode.BINARY, a),
    serverFrame(Opcode.BINARY, b, false),
    serverFrame(Opcode.PING, Buffer.from('hi')),
    serverFrame(Opcode.CONTINUATION, c, false),
    serverFrame(Opcode.PONG, Buffer.from('')),
    serverFrame(Opcode.CONTINUATION, Buffer.alloc(0), true),
    serverFrame(Opcode.BINARY, Buffer.alloc(0)),
    serverFrame(Opcode.CLOSE, Buffer.concat([Buffer.from([0x03, 0xe8]), Buffer.from('bye')])),
  ]);
  const want = Buffer.concat([a, b, c]);
  for (const cut of [1, 2, 3, 7, 13, 1000, 16_384, stream.length]) {
    const { r, seen } = reader();
    for (let at = 0; at < stream.length; at += cut) r.push(stream.subarray(at, at + cut));
    assert.deepEqual(Buffer.concat(seen.binary), want, `cut ${cut}`);
    assert.deepEqual(seen.events, ['ping:hi', 'pong:', 'close:1000:bye'], `cut ${cut}`);
    // Pieces are slices of what the socket delivered, not copies.
    if (cut === stream.length) assert.equal(seen.binary[0]!.buffer, stream.buffer);
  }
});

test('every header split point: 2-, 4- and 10-byte headers cut at each byte', () => {
  for (const size of [0, 1, 125, 126, 65_535, 65_536]) {
    const payload = randomBytes(size);
    const frame = serverFrame(Opcode.BINARY, payload);
    for (let cut = 1; cut <= Math.min(12, frame.length); cut++) {
      const { r, seen } = reader();
      r.push(frame.subarray(0, cut));
      r.push(frame.subarray(cut));
      assert.deepEqual(Buffer.concat(seen.binary), payload, `size ${size}, cut ${cut}`);
    }
  }
});

test('nothing is read after a close frame; a close without a body has no code', () => {
  const { r, seen } = reader();
  r.push(Buffer.concat([serverFrame(Opcode.CLOSE, Buffer.alloc(0)), serverFrame(Opcode.BINARY, Buffer.from('late'))]));
  assert.deepEqual(seen.events, ['close:none:']);
  assert.equal(seen.binary.length, 0);
});

const violations: Array<[string, Buffer, RegExp, number]> = [
  ['a masked server frame', Buffer.concat(Sender.frame(Buffer.from('x'), { fin: true, opcode: 2, mask: true, readOnly: false, rsv1: false })), /masked/, 1002],
  ['reserved bits', Buffer.from([0x80 | 0x40 | 2, 0]), /reserved bits/, 1002],
  ['an unknown data opcode', Buffer.from([0x83, 0]), /unknown opcode 3/, 1002],
  ['an unknown control opcode', Buffer.from([0x8b, 0]), /unknown opcode 11/, 1002],
  ['a fragmented ping', Buffer.from([0x09, 0]), /fragmented a control frame/, 1002],
  ['a control frame over 125 bytes', serverFrame(Opcode.PING, Buffer.alloc(126)), /control frame of 126 bytes/, 1002],
  ['a continuation outside a message', Buffer.from([0x80, 1, 0x61]), /continuation frame outside a message/, 1002],
  [
    'a message inside another',
    Buffer.concat([serverFrame(Opcode.BINARY, Buffer.from('a'), false), serverFrame(Opcode.BINARY, Buffer.from('b'))]),
    /inside another/,
    1002,
  ],
  ['a text message', serverFrame(Opcode.TEXT, Buffer.from('hello')), /text message/, 1003],
  ['a 1-byte close body', Buffer.from([0x88, 1, 3]), /1-byte body/, 1002],
  ['close code 1005 on the wire', serverFrame(Opcode.CLOSE, Buffer.from([0x03, 0xed])), /close code 1005/, 1002],
  ['close code 2000', serverFrame(Opcode.CLOSE, Buffer.from([0x07, 0xd0])), /close code 2000/, 1002],
  ['a 64-bit length with the top bit set', Buffer.from([0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1]), /longer than 2\^53/, 1002],
];

for (const [what, bytes, message, code] of violations) {
  test(`protocol error: ${what} (close ${code})`, () => {
    const { r } = reader();
    assert.throws(
      () => r.push(bytes),
      (err: unknown) => err instanceof WebSocketProtocolError && message.test(err.message) && err.closeCode === code,
    );
  });
}

test('close codes 1000–1003, 1007–1014 and 3000–4999 are accepted', () => {
  for (const code of [1000, 1001, 1003, 1007, 1011, 1014, 3000, 4999]) {
    const { r, seen } = reader();
    r.push(serverFrame(Opcode.CLOSE, Buffer.from([code >> 8, code & 0xff])));
    assert.deepEqual(seen.events, [`close:${code}:`]);
  }
});

/** Our client frames as `ws`'s server side reads them. */
function decodeWithWs(frames: Buffer[]): { messages: Buffer[]; pings: string[]; close?: number; error?: Error } {
  const out: { messages: Buffer[]; pings: string[]; close?: number; error?: Error } = { messages: [], pings: [] };
  const rx = new Receiver({ isServer: true, binaryType: 'nodebuffer' });
  rx.on('message', (d, isBinary) => {
    assert.ok(isBinary);
    out.messages.push(Buffer.from(d));
  });
  rx.on('ping', (d) => out.pings.push(d.toString()));
  rx.on('pong', (d) => out.pings.push(`pong ${d.toString()}`));
  rx.on('conclude', (code) => (out.close = code));
  rx.on('error', (err) => (out.error = err));
  for (const f of frames) rx.write(f);
  return out;
}

test('client frames, zero and random keys, every length class, decode with ws and keep our pieces untouched', () => {
  for (const keys of ['zero', 'random'] as const) {
    for (const size of [0, 1, 3, 125, 126, 127, 65_535, 65_536, 200_001]) {
      const pieces = [randomBytes(Math.floor(size / 3)), randomBytes(size - Math.floor(size / 3))];
      const copies = pieces.map((p) => Buffer.from(p));
      const frame = encodeClientFrame(Opcode.BINARY, pieces, size, keys);
      assert.equal(frame[1]! & 0x80, 0x80, 'the MASK bit is always set');
      const keyAt = size < 126 ? 2 : size < 65_536 ? 4 : 10;
      const key = frame.subarray(keyAt, keyAt + 4);
      if (keys === 'zero') assert.deepEqual(key, Buffer.alloc(4));
      const got = decodeWithWs([frame]);
      assert.equal(got.error, undefined, `${keys} ${size}: ${got.error?.message}`);
      assert.deepEqual(got.messages, [Buffer.concat(copies)], `${keys} ${size}`);
      assert.deepEqual(pieces, copies, 'the payload pieces are not masked in place');
    }
  }
});

test('random keys differ frame by frame; control frames encode too', () => {
  const keys = new Set<string>();
  for (let i = 0; i < 20; i++)
    keys.add(
      encodeClientFrame(Opcode.BINARY, [Buffer.from('x')], 1, 'random')
        .subarray(2, 6)
        .toString('hex'),
    );
  assert.ok(keys.size >= 19, `${keys.size} distinct keys of 20`);
  const got = decodeWithWs([
    encodeClientFrame(Opcode.PING, [Buffer.from('p1')], 2, 'random'),
    encodeClientFrame(Opcode.PONG, [Buffer.from('p2')], 2, 'zero'),
    encodeClientFrame(Opcode.CLOSE, [Buffer.from([0x03, 0xe8])], 2, 'random'),
  ]);
  assert.deepEqual(got.pings, ['p1', 'pong p2']);
  assert.equal(got.close, 1000);
});

test('maskInPlace: the word-wise and the byte-wise XOR agree at every alignment and length', () => {
  const key = Buffer.from([0x12, 0x34, 0x56, 0x78]);
  for (let offset = 0; offset < 4; offset++) {
    for (const length of [0, 1, 4, 5, 31, 64, 1027]) {
      const data = randomBytes(offset + length + 3);
      const fast = Buffer.from(data);
      maskInPlace(fast, offset, length, key);
      const slow = Buffer.from(data);
      for (let i = 0; i < length; i++) slow[offset + i] = slow[offset + i]! ^ key[i & 3]!;
      assert.deepEqual(fast, slow, `offset ${offset}, length ${length}`);
    }
  }
});
