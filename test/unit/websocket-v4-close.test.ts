// How a v4.channel.k8s.io port-forward stream (tunnel/websocket-v4.ts) takes the end of its
// WebSocket: a normal close is the pod's end; a broken connection or a server error is a break the
// client must see; a close before the port prefixes is a stream that was never set up; a message
// no kubelet sends (megabytes: ws would join it whole, per stream) breaks it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { WebSocketV4Transport } from '../../src/tunnel/websocket-v4.js';
import type { ApiConnection } from '../../src/cluster/api.js';
import { UpstreamApiError } from '../../src/core/errors.js';
import { createLogger } from '../../src/core/log.js';

/** A stand-in API server whose port-forward WebSocket does `then` after the prefixes and "partial". */
async function server(then: (ws: WebSocket) => void, prefixes = true) {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', handleProtocols: () => 'v4.channel.k8s.io' });
  await once(wss, 'listening');
  wss.on('connection', (ws) => {
    if (prefixes) {
      ws.send(Buffer.from([0, 80, 0]));
      ws.send(Buffer.from([1, 80, 0]));
      ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('partial')]));
    }
    setTimeout(() => then(ws), 50);
  });
  const port = (wss.address() as AddressInfo).port;
  const api = {
    requestOptions: async () => ({ headers: {} }),
    url: (p: string) => new URL(`ws://127.0.0.1:${port}${p}`),
    invalidate() {},
    accepted() {},
  } as unknown as ApiConnection;
  return { transport: new WebSocketV4Transport(api, createLogger('silent'), { intervalMs: 0, timeoutMs: 0 }), close: () => wss.close() };
}

async function outcome(then: (ws: WebSocket) => void): Promise<{ got: string; end: 'end' | string }> {
  const s = await server(then);
  try {
    const stream = await s.transport.open({ namespace: 'ns', pod: 'p', port: 80 }, { signal: new AbortController().signal, confirmMs: 0 });
    let got = '';
    stream.on('data', (c: Buffer) => (got += c.toString()));
    const end = await new Promise<string>((resolve) => {
      stream.once('end', () => resolve('end'));
      stream.once('error', (err) => resolve(err.message));
    });
    stream.destroy();
    return { got, end };
  } finally {
    s.close();
  }
}

test('a normal close (1000, or a close frame without a code) ends the stream cleanly', async () => {
  assert.deepEqual(await outcome((ws) => ws.close(1000)), { got: 'partial', end: 'end' });
  assert.deepEqual(await outcome((ws) => ws.close()), { got: 'partial', end: 'end' });
});

test('a connection that breaks, or a server error close, is a break, not a clean end', async () => {
  const broken = await outcome((ws) => (ws as unknown as { _socket: { destroy(): void } })._socket.destroy());
  assert.equal(broken.got, 'partial');
  assert.match(broken.end, /broke \(WebSocket close code 1006\)/);
  assert.match((await outcome((ws) => ws.close(1011, 'internal'))).end, /broke \(WebSocket close code 1011\)/);
});

test('a message larger than any kubelet sends breaks the stream, naming the bound, rather than being joined in memory', async () => {
  const huge = await outcome((ws) => {
    ws.send(Buffer.concat([Buffer.from([0]), Buffer.alloc(8 * 1024 * 1024, 0x61)]));
    ws.close(1000);
  });
  assert.equal(huge.got, 'partial');
  assert.match(huge.end, /^port-forward to ns\/p:80 broke: the server sent a message over 1 MiB$/);
});

test('a close before the port prefixes fails the open (retryable)', async () => {
  const s = await server((ws) => ws.close(1000), false);
  try {
    for (const confirmMs of [150, 0]) {
      const opened = s.transport.open({ namespace: 'ns', pod: 'p', port: 80 }, { signal: new AbortController().signal, confirmMs });
      await assert.rejects(
        opened,
        (err: Error) => err instanceof UpstreamApiError && err.retryable === true && /closed before it was set up/.test(err.message),
        `confirmMs ${confirmMs}`,
      );
    }
  } finally {
    s.close();
  }
});
