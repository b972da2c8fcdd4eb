// Fuzz target: the client side of a SPDY/3.1 session (src/tunnel/spdy/{framer,session,stream,
// header-block}.ts; draft-mbelshe-httpbis-spdy-00 as moby/spdystream speaks it) fed what an API
// server or kubelet might send. The proxy has opened one port-forward stream pair (error + data,
// as pf-stream.ts does); the input is the peer's byte stream. receive() must never throw (a bad
// frame fails the session, not the proxy), callbacks must follow the stream's life (nothing after
// a reset, a GOAWAY that left it out or the session's end, no data after FIN), and the session must
// end exactly once.
// The first input byte picks how the bytes are chunked.
import { SpdySession, type SpdyStream } from '../../../src/tunnel/spdy/session.js';
import type { FuzzTarget } from '../engine.js';
import { HeaderCompressor, encodeHeaderBlock } from '../../../src/tunnel/spdy/header-block.js';
import {
  FrameType,
  encodeData,
  encodeGoAway,
  encodePing,
  encodeRawControl,
  encodeRstStream,
  encodeSettings,
  encodeSynReply,
  encodeSynStream,
  encodeWindowUpdate,
} from '../../../src/tunnel/spdy/framer.js';

const CHUNKS = [1, 3, 8, 17, 64, 1024, Infinity];

class Invariant extends Error {}

function check(cond: boolean, what: string): void {
  if (!cond) throw new Invariant(what);
}

/** Watches one stream's callbacks for order. */
function watch(stream: SpdyStream, sessionClosed: () => boolean): void {
  let ended = false;
  let reset = false;
  let gone = false;
  stream.onReply = () => check(!reset && !gone, `stream ${stream.id}: reply after reset/close`);
  stream.onData = (chunk) => {
    check(Buffer.isBuffer(chunk) && chunk.length > 0, `stream ${stream.id}: empty or non-Buffer data`);
    check(!ended && !reset && !gone, `stream ${stream.id}: data after FIN, reset or close`);
  };
  stream.onEnd = () => {
    check(!ended && !reset && !gone, `stream ${stream.id}: FIN twice or after reset/close`);
    ended = true;
  };
  stream.onReset = () => {
    check(!reset && !gone, `stream ${stream.id}: reset twice or after close`);
    reset = true;
  };
  stream.onSessionClose = () => {
    check(!gone && sessionClosed(), `stream ${stream.id}: session close twice or while open`);
    gone = true;
  };
  // A GOAWAY that left the stream out: it is gone, nothing may follow (not even the session's end).
  stream.onUnprocessed = () => {
    check(!reset && !gone && !stream.open, `stream ${stream.id}: unprocessed after reset/close, or still open`);
    reset = gone = true;
  };
}

const settle = () => new Promise((r) => setTimeout(r, 0));

export const spdyTarget: FuzzTarget = {
  name: 'spdy',
  maxLen: 4096,
  dictionary: [
    [0x80, 0x03],
    [0x00, 0x02],
    [0x00, 0x03],
    [0x00, 0x06],
    [0x00, 0x07],
    [0x00, 0x04],
    [0x00, 0x08],
    [0x00, 0x09],
    [0x01],
    [0x00, 0x00, 0x00, 0x01],
    [0x00, 0x00, 0x00, 0x03],
    [0x78, 0x20, 0xe3, 0xc6, 0xa7, 0xc2],
    [0x00, 0x00, 0x00, 0xff, 0xff],
    [0xff, 0xff, 0xff],
  ]
    .map((a) => Buffer.from(a))
    .concat(['streamtype', 'port', 'requestid', 'error forwarding port'].map((s) => Buffer.from(s))),
  include: (url) => url.includes('/dist/src/tunnel/'),
  async run(input) {
    if (input.length === 0) return;
    const chunk = CHUNKS[input[0]! % CHUNKS.length]!;
    const data = input.subarray(1);
    let closes = 0;
    const session = new SpdySession(
      'client',
      { write: () => undefined, close: () => undefined },
      {
        onClose: () => closes++,
        onStream: (s) => s.reset(),
      },
    );
    const error = session.openStream({ streamtype: 'error', port: '8080', requestid: '0' });
    const stream = session.openStream({ streamtype: 'data', port: '8080', requestid: '0' });
    for (const s of [error, stream]) watch(s, () => session.closed);
    for (let off = 0; off < data.length; off += chunk) {
      session.receive(data.subarray(off, Math.min(data.length, off + chunk)));
      if (off % 4 === 0) stream.write(Buffer.from('x'));
    }
    // Header blocks inflate in the thread pool: let them land before judging.
    await settle();
    await settle();
    check(closes <= 1, `onClose ${closes} times`);
    session.destroy();
    check(closes === 1, `onClose ${closes} times after destroy`);
    await settle();
  },
};

/** Byte streams a kubelet plausibly sends after our two SYN_STREAMs (ids 1 and 3), for the corpus. */
export function spdySeeds(): Buffer[] {
  const peer = new HeaderCompressor();
  const block = (h: Record<string, string>) => peer.compress(encodeHeaderBlock(h));
  const replies = [encodeSynReply(1, block({})), encodeSynReply(3, block({}))];
  const seeds = [
    Buffer.concat([...replies, encodeData(3, Buffer.from('HTTP/1.1 200 OK\r\n\r\nhello'), false), encodeData(3, Buffer.alloc(0), true)]),
    Buffer.concat([
      ...replies,
      encodeData(1, Buffer.from('error forwarding port 8080 to pod abc, uid : connection refused'), false),
      encodeRstStream(1, 5),
      encodeRstStream(3, 5),
    ]),
    Buffer.concat([...replies, encodePing(1), encodePing(2), encodeSettings([{ id: 4, value: 1000 }]), encodeWindowUpdate(3, 65536), encodeGoAway(0)]),
    Buffer.concat([
      encodeData(3, Buffer.from('early'), false),
      ...replies,
      encodeSynStream(2, block({ streamtype: 'data' })),
      encodeRawControl(FrameType.HEADERS, 0, Buffer.concat([Buffer.from([0, 0, 0, 3]), block({ a: 'b' })])),
    ]),
    Buffer.concat([...replies, encodeRawControl(0x0f, 0, Buffer.alloc(4))]),
    // The kubelet went away having taken only the error stream: the data stream is left out.
    Buffer.concat([encodeGoAway(1), replies[0]!, encodeData(3, Buffer.from('ignored'), false), encodeData(1, Buffer.alloc(0), true)]),
  ];
  return seeds.map((s, i) => Buffer.concat([Buffer.from([i]), s]));
}
