// tunnel/websocket-v4.ts: a refused upgrade whose body never ends (a misbehaving API server or a
// proxy in between) is answered from its first 16 KiB, not read for as long as it flows. Both
// transports say a front's redirect by where it goes, and never with its query.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { WebSocketV4Transport } from '../../src/tunnel/websocket-v4.js';
import { SpdyTransport } from '../../src/tunnel/spdy-transport.js';
import { NegotiatingTransport } from '../../src/tunnel/negotiate.js';
import { createLogger } from '../../src/core/log.js';
import { ProxyError } from '../../src/core/errors.js';
import type { ApiConnection } from '../../src/cluster/api.js';

test('an endless refusal body: the open fails at once with the status and the start of the body', async (t) => {
  const chunk = Buffer.alloc(64 * 1024, 0x41);
  let sent = 0;
  const server = http.createServer((req, res) => {
    res.writeHead(400, { 'content-type': 'text/plain' });
    const pump = (): void => {
      while (!res.destroyed && res.write(chunk)) sent += chunk.length;
    };
    res.on('drain', pump);
    pump();
    req.socket.on('close', () => res.destroy());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  const api = { requestOptions: async () => ({}), url: (p: string) => new URL(`ws://127.0.0.1:${port}${p}`), invalidate() {} } as unknown as ApiConnection;
  const transport = new WebSocketV4Transport(api, createLogger('silent'), { intervalMs: 0, timeoutMs: 0 });
  const began = Date.now();
  await assert.rejects(
    transport.open({ namespace: 'ns', pod: 'p', port: 80 }, { signal: AbortSignal.timeout(10_000), confirmMs: 0 }),
    (err: Error) => err instanceof ProxyError && /refused by the API server \(400\): AAAA/.test(err.message),
  );
  assert.ok(Date.now() - began < 5_000, `answered after ${Date.now() - began} ms, not at the open's deadline`);
  assert.ok(sent < 64 << 20, `${sent} bytes of body were read`);
});

test("a front's redirect is said by where it goes, never its query or its body (Go's repeats the whole Location)", async (t) => {
  const location = 'https://login.example/sso?session=s3cr3t';
  const body = `<a href="${location}">Found</a>.\n\n`;
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () =>
      socket.end(`HTTP/1.1 302 Found\r\nLocation: ${location}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: ${body.length}\r\n\r\n${body}`),
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const { port } = server.address() as AddressInfo;
  const api = {
    requestOptions: async () => ({}),
    url: (p: string) => new URL(`ws://127.0.0.1:${port}${p}`),
    invalidate() {},
    accepted() {},
  } as unknown as ApiConnection;
  const quiet = { intervalMs: 0, timeoutMs: 0 };
  const transports = [new WebSocketV4Transport(api, createLogger('silent'), quiet), new SpdyTransport(api, createLogger('silent'), { keepalive: quiet })];
  for (const transport of transports) {
    await assert.rejects(transport.open({ namespace: 'ns', pod: 'p', port: 80 }, { signal: AbortSignal.timeout(10_000), confirmMs: 0 }), (err: Error) => {
      assert.ok(err instanceof ProxyError, transport.name);
      assert.match(err.message, /refused \(302\): a redirect to https:\/\/login\.example\/sso \(not the API server/, transport.name);
      // The tunnel's refusal is what the transport negotiation logs.
      for (const text of [err.message, err.cause instanceof Error ? err.cause.message : '']) assert.doesNotMatch(text, /s3cr3t|href/, transport.name);
      return true;
    });
    await transport.close();
  }
});

test('a 101 without Upgrade and Connection (a front that dropped them) is said so, not taken for another subprotocol', async (t) => {
  // Node hands such an answer over as a response, not an upgrade; gorilla/websocket calls it a bad handshake.
  const server = net.createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () => socket.write('HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io\r\n\r\n'));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const { port } = server.address() as AddressInfo;
  const api = {
    requestOptions: async () => ({}),
    url: (p: string) => new URL(`ws://127.0.0.1:${port}${p}`),
    invalidate() {},
    accepted() {},
  } as unknown as ApiConnection;
  const quiet = { intervalMs: 0, timeoutMs: 0 };
  const log = createLogger('silent');
  const spdy = new SpdyTransport(api, log, { keepalive: quiet });
  const v4 = new WebSocketV4Transport(api, log, quiet);
  const auto = new NegotiatingTransport('auto', spdy, v4, log, 'c');
  for (const transport of [spdy, v4, auto]) {
    await assert.rejects(transport.open({ namespace: 'ns', pod: 'p', port: 80 }, { signal: AbortSignal.timeout(10_000), confirmMs: 0 }), (err: Error) => {
      assert.ok(err instanceof ProxyError, transport.name);
      assert.match(
        err.message,
        /port-forward (tunnel )?to ns\/p.* failed: .*101 without the Upgrade: websocket and Connection: Upgrade headers/,
        transport.name,
      );
      assert.doesNotMatch(err.message, /subprotocol|does not offer/, transport.name);
      return true;
    });
  }
  // The API server's tunnel was never refused: auto does not settle on per-stream WebSockets.
  assert.equal(auto.name, 'spdy');
  await auto.close();
});
