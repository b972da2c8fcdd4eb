// A server that sends WebSocket pings faster than it reads our pongs (tunnel/pong-pacer.ts): both
// of our WebSocket clients — the SPDY tunnel's byte socket and the v4 per-stream transport on `ws`
// — keep one pong in flight and answer only the latest ping meanwhile (RFC 6455 §5.5.3), instead
// of queueing a pong per ping without bound (the byte socket) or ending the connection (`ws` on its
// own terminates once 60 pongs wait to be written, maxPendingAutoPongs: a burst of pings in one
// read broke the client's stream). A peer that reads its pongs gets one per ping.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { PongPacer } from '../../src/tunnel/pong-pacer.js';
import { ByteWebSocket } from '../../src/tunnel/websocket/byte-socket.js';
import { upgradeToWebSocket } from '../../src/tunnel/websocket/handshake.js';
import { WebSocketV4Transport } from '../../src/tunnel/websocket-v4.js';
import type { ApiConnection } from '../../src/cluster/api.js';
import { createLogger } from '../../src/core/log.js';

const PINGS = 40_000;
const payloadOf = (i: number): Buffer => Buffer.concat([Buffer.from(`ping ${i} `), Buffer.alloc(100, 0x61)]);

async function startServer(protocol: string): Promise<{ wss: WebSocketServer; port: number; peer: Promise<WebSocket> }> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', handleProtocols: () => protocol });
  await once(wss, 'listening');
  const peer = once(wss, 'connection').then(([ws]) => ws as WebSocket);
  return { wss, port: (wss.address() as AddressInfo).port, peer };
}

/**
 * The peer stops reading, sends PINGS pings and then `marker` (a binary message); once the client
 * has seen the marker (all pings taken), the peer reads again. Resolves with the pong payloads it got
 * until the latest ping's was among them.
 */
async function flood(peer: WebSocket, marker: Buffer, markerSeen: Promise<unknown>): Promise<string[]> {
  const socket = (peer as unknown as { _socket: import('node:net').Socket })._socket;
  const pongs: string[] = [];
  const last = payloadOf(PINGS - 1).toString();
  const answeredLast = new Promise<void>((resolve) =>
    peer.on('pong', (data: Buffer) => {
      pongs.push(data.toString());
      if (data.toString() === last) resolve();
    }),
  );
  socket.pause();
  for (let i = 0; i < PINGS; i++) peer.ping(payloadOf(i));
  peer.send(marker);
  await markerSeen;
  socket.resume();
  await answeredLast;
  return pongs;
}

function assertPaced(pongs: string[]): void {
  // One pong per batch of pings the client read at once, not one per ping: a few hundred at most
  // (5 MB of pings arrive in reads of ~64 KiB). Without pacing every ping is answered: 40,000.
  assert.ok(pongs.length < PINGS / 20, `${pongs.length} pongs for ${PINGS} pings`);
  // Answers go to pings in order; the last one answers the latest ping.
  const numbers = pongs.map((p) => Number(/^ping (\d+) /.exec(p)?.[1]));
  assert.deepEqual(
    numbers,
    [...numbers].sort((a, b) => a - b),
  );
  assert.equal(numbers.at(-1), PINGS - 1);
}

test('PongPacer: a peer that reads its pongs gets one per ping, each with its payload; a failed write is not in flight', async () => {
  const written: string[] = [];
  const pending: Array<() => void> = [];
  const pacer = new PongPacer((payload, done) => {
    written.push(payload.toString());
    pending.push(done);
    return true;
  });
  pacer.ping(Buffer.from('a'));
  pending.shift()!();
  pacer.ping(Buffer.from('b'));
  pending.shift()!();
  assert.deepEqual(written, ['a', 'b']);
  // While one is in flight, only the latest ping is kept.
  pacer.ping(Buffer.from('c'));
  pacer.ping(Buffer.from('d'));
  pacer.ping(Buffer.from('e'));
  assert.deepEqual(written, ['a', 'b', 'c']);
  pending.shift()!();
  assert.deepEqual(written, ['a', 'b', 'c', 'e']);
  pending.shift()!();
  assert.equal(pacer.waiting, false);

  const closed = new PongPacer(() => false);
  closed.ping(Buffer.from('x'));
  assert.equal(closed.waiting, false, 'nothing written: nothing waits for a callback that never comes');
});

test('the SPDY tunnel byte socket: a ping flood the server does not read gets paced pongs, the latest answered', { timeout: 30_000 }, async () => {
  const { wss, port, peer } = await startServer('tunnel.test');
  try {
    const up = await upgradeToWebSocket(new URL(`ws://127.0.0.1:${port}/pf`), { headers: {} }, 'tunnel.test', 5000);
    const client = new ByteWebSocket(up.socket, up.head, 'zero');
    const marker = Buffer.from('after the pings');
    const markerSeen = new Promise<void>((resolve) => {
      client.onData = (piece) => {
        if (piece.toString() === marker.toString()) resolve();
      };
    });
    const pongs = await flood(await peer, marker, markerSeen);
    assertPaced(pongs);
    assert.ok(client.isOpen, 'the tunnel stays open');
    client.terminate();
  } finally {
    wss.close();
  }
});

test('the v4 per-stream transport: a ping flood the server does not read gets paced pongs, the latest answered', { timeout: 30_000 }, async () => {
  const { wss, port, peer } = await startServer('v4.channel.k8s.io');
  try {
    const api = {
      requestOptions: async () => ({ headers: {} }),
      url: (p: string) => new URL(`ws://127.0.0.1:${port}${p}`),
      invalidate() {},
      accepted() {},
    } as unknown as ApiConnection;
    const transport = new WebSocketV4Transport(api, createLogger('silent'), { intervalMs: 0, timeoutMs: 0 });
    const opening = transport.open({ namespace: 'ns', pod: 'p', port: 80 }, { signal: new AbortController().signal, confirmMs: 0 });
    const server = await peer;
    server.send(Buffer.from([0, 80, 0]));
    server.send(Buffer.from([1, 80, 0]));
    const stream = await opening;
    const markerSeen = new Promise<void>((resolve, reject) => {
      stream.on('data', (c: Buffer) => c.toString() === 'after the pings' && resolve());
      stream.once('close', () => reject(new Error('the stream closed during the pings')));
    });
    const pongs = await flood(server, Buffer.concat([Buffer.from([0]), Buffer.from('after the pings')]), markerSeen);
    assertPaced(pongs);
    assert.equal(stream.destroyed, false, 'the stream stays open');
    stream.destroy();
    await transport.close();
  } finally {
    wss.close();
  }
});
