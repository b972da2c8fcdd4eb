// SPDY/3.1 framer: the dictionary, frame encoding/decoding at every split, header blocks, and
// header compression across several frames of one session in both directions (our stored-block
// writer read by zlib; real zlib compression with Z_SYNC_FLUSH per block read by our reader).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { SPDY_DICTIONARY, adler32 } from '../../src/tunnel/spdy/dictionary.js';
import { HeaderCompressor, HeaderDecompressor, MAX_HEADER_BLOCK, decodeHeaderBlock, encodeHeaderBlock } from '../../src/tunnel/spdy/header-block.js';
import {
  FrameReader,
  SpdyProtocolError,
  encodeData,
  encodeGoAway,
  encodePing,
  encodeRawControl,
  encodeRstStream,
  encodeSettings,
  encodeSynReply,
  encodeSynStream,
  encodeWindowUpdate,
  type Frame,
  type Headers,
} from '../../src/tunnel/spdy/framer.js';

test('the SPDY/3 dictionary is 1423 bytes with Adler-32 0xE3C6A7C2, the DICTID zlib writes', () => {
  assert.equal(SPDY_DICTIONARY.length, 1423);
  assert.equal(adler32(SPDY_DICTIONARY), 0xe3c6a7c2);
  const z = zlib.deflateSync(Buffer.from('x'), { dictionary: SPDY_DICTIONARY });
  assert.equal(z.readUInt32BE(2), 0xe3c6a7c2);
  assert.equal(SPDY_DICTIONARY.subarray(0, 11).toString('latin1'), '\0\0\0\x07options');
  assert.ok(SPDY_DICTIONARY.toString('latin1').endsWith(',*,enq=0.'));
});

/** Frames as read from `bytes` cut at `splits`, a DATA frame's pieces joined back into one frame. */
function readAll(bytes: Buffer, splits: number[]): Frame[] {
  const r = new FrameReader();
  const frames: Frame[] = [];
  let prev = 0;
  let open: Extract<Frame, { type: 'data' }> | undefined;
  for (const at of [...splits, bytes.length]) {
    r.push(bytes.subarray(prev, at));
    prev = at;
    for (let f = r.next(); f; f = r.next()) {
      if (f.type !== 'data') {
        assert.equal(open, undefined, 'a control frame never comes between the pieces of a DATA frame');
        frames.push(f);
        continue;
      }
      if (open) {
        assert.equal(f.streamId, open.streamId);
        open.data = Buffer.concat([open.data, f.data]);
        open.fin = f.fin;
        open.end = f.end;
      } else {
        open = { ...f };
        frames.push(open);
      }
      if (f.end) open = undefined;
    }
  }
  assert.equal(r.buffered, 0);
  assert.equal(open, undefined, 'no DATA frame is left half read');
  return frames;
}

test('a DATA frame comes out as its bytes arrive, in slices of the received chunks, FIN on the last', () => {
  const payload = Buffer.alloc(40_000, 7);
  const bytes = encodeData(5, payload, true);
  const r = new FrameReader();
  const first = Buffer.from(bytes.subarray(0, 20_008));
  const second = Buffer.from(bytes.subarray(20_008, 30_008));
  const third = Buffer.from(bytes.subarray(30_008));
  r.push(first);
  const a = r.next();
  assert.deepEqual(a && { ...a, data: a.type === 'data' ? a.data.length : -1 }, { type: 'data', streamId: 5, fin: false, data: 20_000, end: false });
  assert.equal(r.next(), undefined, 'nothing more until more bytes arrive');
  r.push(second);
  r.push(third);
  const b = r.next() as Extract<Frame, { type: 'data' }>;
  const c = r.next() as Extract<Frame, { type: 'data' }>;
  assert.deepEqual([b.data.length, b.fin, b.end, c.data.length, c.fin, c.end], [10_000, false, false, 10_000, true, true]);
  // Slices, not copies: each piece shares memory with the chunk it came in.
  assert.equal((a as Extract<Frame, { type: 'data' }>).data.buffer, first.buffer);
  assert.equal(b.data.buffer, second.buffer);
  assert.equal(c.data.buffer, third.buffer);
  assert.equal(r.next(), undefined);
  assert.equal(r.buffered, 0);
});

test('frames survive being cut at every byte boundary and being glued together', () => {
  const block = Buffer.from([1, 2, 3]);
  const bytes = Buffer.concat([
    encodeSynStream(1, block, { flags: 0x01, priority: 7 }),
    encodeSynReply(2, block, 0x01),
    encodeData(1, Buffer.from('hello'), false),
    encodeData(3, Buffer.alloc(0), true),
    encodeRstStream(5, 5),
    encodePing(7),
    encodeGoAway(9, 0),
    encodeSettings([{ id: 4, value: 100, flags: 1 }]),
    encodeWindowUpdate(1, 65536),
  ]);
  const expected = readAll(bytes, []);
  assert.deepEqual(
    expected.map((f) => f.type),
    ['syn_stream', 'syn_reply', 'data', 'data', 'rst_stream', 'ping', 'goaway', 'settings', 'window_update'],
  );
  assert.deepEqual(expected[0], { type: 'syn_stream', streamId: 1, associatedId: 0, priority: 7, slot: 0, flags: 1, block });
  assert.deepEqual(expected[2], { type: 'data', streamId: 1, fin: false, data: Buffer.from('hello'), end: true });
  assert.deepEqual(expected[3], { type: 'data', streamId: 3, fin: true, data: Buffer.alloc(0), end: true });
  assert.deepEqual(expected[4], { type: 'rst_stream', streamId: 5, status: 5 });
  assert.deepEqual(expected[6], { type: 'goaway', lastGoodStreamId: 9, status: 0 });
  assert.deepEqual(expected[7], { type: 'settings', flags: 0, entries: [{ flags: 1, id: 4, value: 100 }] });
  for (let cut = 1; cut < bytes.length; cut++) assert.deepEqual(readAll(bytes, [cut]), expected, `cut at ${cut}`);
  const everyByte = Array.from({ length: bytes.length - 1 }, (_, i) => i + 1);
  assert.deepEqual(readAll(bytes, everyByte), expected);
});

test('control frames are laid out as spdystream writes them', () => {
  assert.deepEqual(encodeRstStream(3, 5), Buffer.from('80030003000000080000000300000005', 'hex'));
  assert.deepEqual(encodePing(1), Buffer.from('800300060000000400000001', 'hex'));
  assert.deepEqual(encodeGoAway(0, 0), Buffer.from('80030007000000080000000000000000', 'hex'));
  assert.deepEqual(encodeData(1, Buffer.from('ab'), true), Buffer.from('00000001010000026162', 'hex'));
});

test('unknown control types, bad GOAWAY/PING and stream 0 are protocol errors', () => {
  const bad = [
    encodeRawControl(5, 0, Buffer.alloc(4)),
    encodeRawControl(10, 0, Buffer.alloc(8)),
    encodeRawControl(7, 0, Buffer.alloc(4)),
    encodeRawControl(6, 1, Buffer.from([0, 0, 0, 1])),
    encodeRawControl(3, 0, Buffer.from([0, 0, 0, 1, 0, 0, 0, 0])),
    encodeData(0, Buffer.from('x'), false),
    Buffer.from('8002000100000000', 'hex'), // SPDY/2
  ];
  for (const b of bad) {
    const r = new FrameReader();
    r.push(b);
    assert.throws(() => r.next(), SpdyProtocolError, b.toString('hex'));
  }
});

test('header blocks: count, length-prefixed lowercase names and values; strict parsing', () => {
  const h = { streamtype: 'data', port: '8080', requestid: '0' };
  const block = encodeHeaderBlock(h);
  assert.equal(block.readUInt32BE(0), 3);
  assert.equal(block.readUInt32BE(4), 10);
  assert.equal(block.subarray(8, 18).toString(), 'streamtype');
  assert.deepEqual({ ...decodeHeaderBlock(block) }, h);
  assert.deepEqual({ ...decodeHeaderBlock(encodeHeaderBlock({ 'X-Upper': 'a\0b' })) }, { 'x-upper': 'a\0b' });
  const upper = Buffer.concat([Buffer.from([0, 0, 0, 1, 0, 0, 0, 1]), Buffer.from('A'), Buffer.from([0, 0, 0, 0])]);
  assert.throws(() => decodeHeaderBlock(upper), /not lowercase/);
  const dup = Buffer.concat([Buffer.from([0, 0, 0, 2]), ...[0, 1].map(() => Buffer.from([0, 0, 0, 1, 0x61, 0, 0, 0, 0]))]);
  assert.throws(() => decodeHeaderBlock(dup), /twice/);
  assert.throws(() => decodeHeaderBlock(Buffer.concat([block, Buffer.from([0])])), /trailing/);
  assert.throws(() => decodeHeaderBlock(block.subarray(0, 10)), /truncated/);
  assert.deepEqual({ ...decodeHeaderBlock(encodeHeaderBlock({})) }, {});
});

const sessionHeaders: Headers[] = [
  { streamtype: 'error', port: '8080', requestid: '0' },
  { streamtype: 'data', port: '8080', requestid: '0' },
  {},
  { streamtype: 'error', port: '5432', requestid: '17' },
  { big: 'v'.repeat(70_000), other: 'x\0y' },
];

test('our header blocks (stored deflate blocks + sync marker) decode with zlib across one session', async () => {
  const c = new HeaderCompressor();
  const blocks = sessionHeaders.map((h) => c.compress(encodeHeaderBlock(h)));
  assert.deepEqual(blocks[0]!.subarray(0, 6), Buffer.from('7820e3c6a7c2', 'hex'), 'zlib header with FDICT and the dictionary id');
  for (const b of blocks) assert.deepEqual(b.subarray(-5), Buffer.from('000000ffff', 'hex'), 'every block ends on a sync-flush marker');
  const d = new HeaderDecompressor();
  for (const [i, b] of blocks.entries()) assert.deepEqual({ ...decodeHeaderBlock(d.decompress(b)) }, sessionHeaders[i]);
  // A plain zlib inflater with the dictionary reads the concatenation too.
  const all = zlib.inflateSync(Buffer.concat(blocks), { dictionary: SPDY_DICTIONARY, finishFlush: zlib.constants.Z_SYNC_FLUSH });
  assert.deepEqual(all, Buffer.concat(sessionHeaders.map(encodeHeaderBlock)));
});

test('real zlib compression with Z_SYNC_FLUSH per block (as spdystream writes) decodes frame by frame', async () => {
  const deflate = zlib.createDeflate({ dictionary: SPDY_DICTIONARY, level: 9 });
  const out: Buffer[] = [];
  deflate.on('data', (b: Buffer) => out.push(b));
  const compressed: Buffer[] = [];
  for (const h of sessionHeaders) {
    deflate.write(encodeHeaderBlock(h));
    await new Promise<void>((r) => deflate.flush(zlib.constants.Z_SYNC_FLUSH, () => r()));
    compressed.push(Buffer.concat(out.splice(0)));
  }
  deflate.close();
  assert.ok(compressed[1]!.length < 20, 'the second block reuses the window: a few bytes');
  const d = new HeaderDecompressor();
  const decoded = compressed.map((b) => d.decompress(b));
  assert.deepEqual(
    decoded.map((b) => ({ ...decodeHeaderBlock(b) })),
    sessionHeaders,
  );
});

test('consecutive blocks of several frames inflate in one call, back to back', async () => {
  const c = new HeaderCompressor();
  const blocks = sessionHeaders.map((h) => c.compress(encodeHeaderBlock(h)));
  const d = new HeaderDecompressor();
  const first = d.decompress(blocks[0]!);
  assert.deepEqual({ ...decodeHeaderBlock(first) }, sessionHeaders[0]);
  const rest = d.decompress(Buffer.concat(blocks.slice(1)));
  assert.deepEqual(rest, Buffer.concat(sessionHeaders.slice(1).map(encodeHeaderBlock)));
});

test('a corrupt header block fails that and every later decompression', () => {
  const d = new HeaderDecompressor();
  assert.throws(() => d.decompress(Buffer.from('78bbffffffff0000', 'hex')), /does not decompress/);
  assert.throws(() => d.decompress(new HeaderCompressor().compress(encodeHeaderBlock({}))), /does not decompress/);
});

test('a header block primed with another dictionary does not decompress', () => {
  const other = zlib.deflateSync(encodeHeaderBlock({ a: 'b' }), {
    dictionary: Buffer.from('not the spdy dictionary'),
    finishFlush: zlib.constants.Z_SYNC_FLUSH,
  });
  assert.throws(() => new HeaderDecompressor().decompress(other), /does not decompress/);
});

test('a header block that expands past MAX_HEADER_BLOCK fails the context instead of filling memory', () => {
  // 4 MiB of zeros deflate to ~4 KiB: a small frame, a large block.
  const bomb = zlib.deflateSync(Buffer.alloc(4 * MAX_HEADER_BLOCK), {
    dictionary: SPDY_DICTIONARY,
    finishFlush: zlib.constants.Z_SYNC_FLUSH,
    flush: zlib.constants.Z_SYNC_FLUSH,
  });
  assert.ok(bomb.length < 64 * 1024);
  const d = new HeaderDecompressor();
  assert.throws(() => d.decompress(bomb), /does not decompress: header block of more than 1048576 bytes/);
  assert.throws(() => d.decompress(bomb), /does not decompress/);
});

test('a compressed stream that ends (a final deflate block) fails: later blocks could not be read', () => {
  const ended = zlib.deflateSync(encodeHeaderBlock({ a: 'b' }), { dictionary: SPDY_DICTIONARY });
  assert.throws(() => new HeaderDecompressor().decompress(ended), /the compressed stream ended/);
});

test('property: blocks zlib compresses at any level and strategy, one sync flush each, decode in order', async () => {
  const rnd = (n: number) => Math.floor(Math.random() * n);
  const word = () => Buffer.from(Array.from({ length: 1 + rnd(40) }, () => 97 + rnd(6))).toString();
  for (let round = 0; round < 40; round++) {
    const level = rnd(10);
    const strategy = [
      zlib.constants.Z_DEFAULT_STRATEGY,
      zlib.constants.Z_FILTERED,
      zlib.constants.Z_HUFFMAN_ONLY,
      zlib.constants.Z_RLE,
      zlib.constants.Z_FIXED,
    ][rnd(5)];
    const deflate = zlib.createDeflate({ dictionary: SPDY_DICTIONARY, level, strategy });
    const out: Buffer[] = [];
    deflate.on('data', (b: Buffer) => out.push(b));
    const headers: Headers[] = Array.from({ length: 1 + rnd(12) }, () =>
      Object.fromEntries(Array.from({ length: rnd(6) }, (_, i) => [`${word()}-${i}`, rnd(8) === 0 ? 'v'.repeat(rnd(5000)) : word()])),
    );
    const d = new HeaderDecompressor();
    for (const h of headers) {
      deflate.write(encodeHeaderBlock(h));
      await new Promise<void>((r) => deflate.flush(zlib.constants.Z_SYNC_FLUSH, () => r()));
      assert.deepEqual({ ...decodeHeaderBlock(d.decompress(Buffer.concat(out.splice(0)))) }, h, `level ${level} strategy ${strategy}`);
    }
    deflate.close();
  }
});

// Captured from real kubectl v1.32.4 (`kubectl port-forward pod/echo-… 17000:7000`, tunnelled in a
// WebSocket) against the simulated cluster with SIM_SPDY_CAPTURE set: the client bytes of the first
// TCP connection — error stream SYN_STREAM (id 1) and its immediate FIN, data stream SYN_STREAM
// (id 3), 11 bytes of data, FIN. Go's zlib at BestCompression (FLG 0xF9), one context per session:
// the second header block is only 14 bytes because it refers back into the first.
const KUBECTL_CAPTURE =
  '800300010000003e0000000100000000000078f9e3c6a7c202253a703a2b294a4dcc851625aca9a0808614cb45e01c606e6060c0c0c0c0590489c64c50f26634' +
  '00000000ffff0000000101000000800300010000001800000003000000000000c2aa19540e2512d60b000000ffff000000030000000b02d48d83966b663385' +
  'f6360000000301000000';

test('a SYN_STREAM pair as kubectl sends it decodes, headers and all', async () => {
  const bytes = Buffer.from(KUBECTL_CAPTURE, 'hex');
  const frames = readAll(bytes, [3, 20, 70, 71, 100]);
  assert.deepEqual(
    frames.map((f) => f.type),
    ['syn_stream', 'data', 'syn_stream', 'data', 'data'],
  );
  const d = new HeaderDecompressor();
  const headers = [];
  for (const f of frames)
    if (f.type === 'syn_stream') headers.push({ id: f.streamId, flags: f.flags, priority: f.priority, h: { ...decodeHeaderBlock(d.decompress(f.block)) } });
  assert.deepEqual(headers, [
    { id: 1, flags: 0, priority: 0, h: { streamtype: 'error', port: '7000', requestid: '0' } },
    { id: 3, flags: 0, priority: 0, h: { streamtype: 'data', port: '7000', requestid: '0' } },
  ]);
  assert.deepEqual(frames[1], { type: 'data', streamId: 1, fin: true, data: Buffer.alloc(0), end: true });
  assert.deepEqual(frames[3], { type: 'data', streamId: 3, fin: false, data: Buffer.from('02d48d83966b663385f636', 'hex'), end: true });
  assert.deepEqual(frames[4], { type: 'data', streamId: 3, fin: true, data: Buffer.alloc(0), end: true });
});
