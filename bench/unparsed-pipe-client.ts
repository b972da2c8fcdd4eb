// A Node.js forwarder with no protocol work, for a download (bench/unparsed-pipe.ts starts it).
// It opens the proxy's tunnel by hand, once, and keeps it (a WebSocket, RFC 6455 §4.1, with
// subprotocol SPDY/3.1+portforward.k8s.io). For each local connection, one at a time, it sends the
// two SYN_STREAMs of a port-forward (error and data, as pf-stream.ts does) and writes every
// decrypted byte that comes back, WebSocket and SPDY headers and all, unparsed to that connection,
// in corked writes of 64 KiB (the most the proxy's relay writes at once). No parsing and no
// streams: what is left is TLS, the reads and the writes, the API server read as the proxy reads
// it (slab-reads.ts). Prints {"port":N} once it listens. argv: server ca-file token namespace pod port
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { encodeRstStream, encodeSynStream, RstStatus } from '../src/tunnel/spdy/framer.js';
import { encodeHeaderBlock, HeaderCompressor } from '../src/tunnel/spdy/header-block.js';
import { TUNNEL_PROTOCOL } from '../src/tunnel/spdy/tunnel.js';
import { encodeClientFrame } from '../src/tunnel/websocket/frame-writer.js';
import { SlabReads } from '../src/tunnel/websocket/slab-reads.js';

const OPCODE_BINARY = 0x2;
const BATCH = 64 * 1024;

const [server, caFile, token, namespace, pod, port] = process.argv.slice(2) as [string, string, string, string, string, string];
const url = new URL(server);
const headers = new HeaderCompressor();
let nextStreamId = 1;
let requests = 0;

/** The connection now served, and the bytes corked for it. */
let current: { local: net.Socket; unsent: number } | undefined;

function spdyMessage(...frames: Buffer[]): Buffer {
  const spdy = Buffer.concat(frames);
  return encodeClientFrame(OPCODE_BINARY, [spdy], spdy.length, 'random');
}

function flush(): void {
  if (!current || current.unsent === 0) return;
  current.unsent = 0;
  current.local.uncork();
}

// The tail of a download goes out once the tunnel has been quiet this long: no frame is parsed to
// tell a unit's end, so every write but the last holds a full BATCH (at most as many as the proxy's).
const TAIL_MS = 5;
const tail = setTimeout(flush, TAIL_MS).unref();

function toCurrent(bytes: Buffer): void {
  const c = current;
  if (!c || c.local.destroyed) return; // a closed stream's trailing frames
  if (c.unsent === 0) c.local.cork();
  c.unsent += bytes.length;
  const full = !c.local.write(bytes);
  if (c.unsent >= BATCH || full) process.nextTick(flush);
  else tail.refresh();
  // Records of one read keep coming after pause(): one drain listener is enough.
  if (full && !api.isPaused()) {
    api.pause();
    c.local.once('drain', () => api.resume());
  }
}

let head = '';
let resolveUpgrade!: () => void;
const upgraded = new Promise<void>((resolve) => (resolveUpgrade = resolve));
const reads: SlabReads = new SlabReads((piece) => {
  head += piece.toString('latin1');
  const end = head.indexOf('\r\n\r\n');
  if (end < 0) return;
  if (!head.startsWith('HTTP/1.1 101') || !head.toLowerCase().includes(`sec-websocket-protocol: ${TUNNEL_PROTOCOL.toLowerCase()}`)) {
    fail(`no tunnel: ${head.split('\r\n')[0]}`);
  }
  reads.hold();
  reads.attach(Buffer.from(head.slice(end + 4), 'latin1'), toCurrent);
  resolveUpgrade();
});
const api = tls.connect({
  host: url.hostname,
  port: Number(url.port),
  ca: readFileSync(caFile),
  ALPNProtocols: ['http/1.1'],
  onread: reads.onread,
} as tls.ConnectionOptions);
// Flowing, so that 'end' is emitted (reads never go through the Readable).
api.resume();
api.on('secureConnect', () => {
  api.write(
    `GET /api/v1/namespaces/${namespace}/pods/${pod}/portforward HTTP/1.1\r\nHost: ${url.host}\r\n` +
      `Authorization: Bearer ${token}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n` +
      `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Protocol: ${TUNNEL_PROTOCOL}\r\n\r\n`,
  );
});
api.on('error', (err) => fail(err.message));
api.on('end', () => fail('the API server closed the tunnel'));

async function serve(local: net.Socket): Promise<void> {
  local.on('error', () => undefined);
  // Read (and drop) what the client sends, so that its close is seen.
  local.resume();
  await upgraded;
  // One download at a time (the bytes are not told apart): a new connection ends the last.
  current?.local.destroy();
  const ids: [number, number] = [nextStreamId, nextStreamId + 2];
  nextStreamId += 4;
  const requestid = String(requests++);
  const syn = (id: number, streamtype: string) => encodeSynStream(id, headers.compress(encodeHeaderBlock({ streamtype, port, requestid })));
  current = { local, unsent: 0 };
  api.write(spdyMessage(syn(ids[0], 'error'), syn(ids[1], 'data')));
  local.on('close', () => {
    api.write(spdyMessage(encodeRstStream(ids[0], RstStatus.CANCEL), encodeRstStream(ids[1], RstStatus.CANCEL)));
    if (current?.local === local) current = undefined;
  });
}

function fail(why: string): never {
  process.stderr.write(`Node.js unparsed pipe: ${why}\n`);
  process.exit(1);
}

// Room for a few batches: a full client socket pauses the tunnel's socket itself (the proxy pauses
// one stream), which costs a loop round trip of its own.
const listener = net.createServer({ highWaterMark: 4 * BATCH }, (local) => void serve(local));
listener.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (listener.address() as net.AddressInfo).port })}\n`);
});
