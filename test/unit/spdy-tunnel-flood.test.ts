// The bound on the replies a SPDY peer makes us owe (spdy/owed-replies.ts), on a real tunnel: a
// PodTunnel over TCP to a `ws` server standing in for the API server. A server that floods PINGs
// and stops reading: the tunnel ends with SpdyFloodError while what it queues stays small. A
// server that sends PINGs just as fast but reads its echoes: every one is echoed, three times the
// bound and more, and our keepalive PINGs keep being answered.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type net from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { ByteWebSocket } from '../../src/tunnel/websocket/byte-socket.js';
import { upgradeToWebSocket } from '../../src/tunnel/websocket/handshake.js';
import { PodTunnel, TUNNEL_PROTOCOL } from '../../src/tunnel/spdy/tunnel.js';
import { MAX_QUEUED_REPLIES, SpdyFloodError } from '../../src/tunnel/spdy/session.js';
import { FrameReader, encodePing } from '../../src/tunnel/spdy/framer.js';

let server: http.Server;
let wss: WebSocketServer;
let port: number;
let onConnection: (ws: WebSocket) => void = () => undefined;

before(async () => {
  server = http.createServer();
  // ws refuses "SPDY/3.1+…" as a subprotocol token ("/"): echoed by hand, as an API server does.
  wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  server.on('upgrade', (req, socket, head) => {
    delete req.headers['sec-websocket-protocol'];
    wss.once('headers', (headers) => headers.push(`Sec-WebSocket-Protocol: ${TUNNEL_PROTOCOL}`));
    wss.handleUpgrade(req, socket, head, (ws) => onConnection(ws));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as net.AddressInfo).port;
});

after(() => {
  wss.close();
  server.close();
});

/** A tunnel to the server; `closed` resolves with the error it ended with. */
async function tunnel(keepalive = { intervalMs: 0, timeoutMs: 0 }) {
  const peer = new Promise<WebSocket>((r) => (onConnection = r));
  const up = await upgradeToWebSocket(new URL(`ws://127.0.0.1:${port}/api/v1/namespaces/a/pods/b/portforward`), { headers: {} }, TUNNEL_PROTOCOL, 5000);
  let closedWith: (err?: Error) => void = () => undefined;
  const closed = new Promise<Error | undefined>((r) => (closedWith = r));
  const t = new PodTunnel(new ByteWebSocket(up.socket, up.head, 'zero'), { keepalive, onClosed: (_t, err) => closedWith(err) });
  return { tunnel: t, peer: await peer, closed };
}

/** `n` PINGs with the server's (even) ids from `from` on, in one message. */
const pings = (n: number, from: number) => Buffer.concat(Array.from({ length: n }, (_, i) => encodePing(2 * (from + i + 1))));

test('a server that floods PINGs and reads nothing: the tunnel ends once 10,000 echoes wait unsent; its queue stays small', async () => {
  const { tunnel: t, peer, closed } = await tunnel();
  peer.pause();
  let sent = 0;
  let most = 0;
  let over = false;
  const sample = setInterval(() => (most = Math.max(most, t.buffered)), 1);
  const flood = (): void => {
    if (over) return;
    if (peer.bufferedAmount < 1 << 20) {
      peer.send(pings(4096, sent));
      sent += 4096;
      setImmediate(flood);
    } else setTimeout(flood, 1);
  };
  flood();
  const err = await Promise.race([closed, new Promise<string>((r) => setTimeout(() => r('still open after 30 s'), 30_000).unref())]);
  over = true;
  clearInterval(sample);
  most = Math.max(most, t.buffered);
  peer.terminate();
  t.kill(new Error('test over'));
  assert.ok(err instanceof SpdyFloodError, String(err));
  assert.match(err.message, /10000 replies unsent/);
  // 12-byte echoes in WebSocket messages: the bound's worth with room for framing, far below what was sent.
  assert.ok(most < MAX_QUEUED_REPLIES * 12 * 2, `at most ${most} bytes queued (the server sent ${sent} PINGs)`);
});

test('a server that sends PINGs just as fast but reads the echoes gets every one; our keepalive PINGs are answered throughout', async () => {
  const { tunnel: t, peer, closed } = await tunnel({ intervalMs: 20, timeoutMs: 1000 });
  let ended: Error | undefined | 'open' = 'open';
  void closed.then((err) => (ended = err));
  const reader = new FrameReader();
  let echoes = 0;
  peer.on('message', (data: Buffer) => {
    reader.push(data);
    for (let f = reader.next(); f; f = reader.next()) {
      if (f.type !== 'ping') continue;
      if (f.id % 2 === 0) echoes++;
      else peer.send(encodePing(f.id)); // our keepalive PING: answered, as the kubelet does
    }
  });
  const burst = 2048;
  const total = burst * Math.ceil((3 * MAX_QUEUED_REPLIES + 1) / burst);
  try {
    for (let sent = 0; sent < total; sent += burst) {
      peer.send(pings(burst, sent));
      await new Promise((r) => setTimeout(r, 2));
    }
    const deadline = Date.now() + 10_000;
    while (echoes < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    assert.equal(echoes, total, 'every PING echoed');
    assert.equal(ended, 'open');
    const rtt = await t.session.ping();
    assert.ok(rtt >= 0, 'our own PING comes back');
    assert.equal(ended, 'open', 'keepalive found the tunnel alive');
  } finally {
    t.shutdown();
    peer.terminate();
  }
});
