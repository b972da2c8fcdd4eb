// doctor/protocols.ts: each probe's refusal is read from the start of its body. An API server (or
// a front) whose refusals never end must not hold `doctor` for ever.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { probeProtocols } from '../../src/doctor/protocols.js';
import type { ApiConnection } from '../../src/cluster/api.js';

test('refusals whose bodies never end are answered from their start, well before the timeout', { timeout: 30_000 }, async (t) => {
  const answer = (write: (chunk: string) => boolean, onDrain: (f: () => void) => void, done: () => boolean) => {
    write('{"kind":"Status","message":"upgrade refused here"}');
    const pump = (): void => {
      while (!done() && write(' '.repeat(16 * 1024)));
    };
    onDrain(pump);
    pump();
  };
  const server = http.createServer((_req, res) => {
    res.writeHead(400, { 'Content-Type': 'application/json' });
    answer(
      (c) => res.write(c),
      (f) => res.on('drain', f),
      () => res.destroyed,
    );
  });
  // The WebSocket probes' upgrade requests: the same refusal, written on the socket.
  server.on('upgrade', (_req, socket) => {
    socket.on('error', () => undefined);
    socket.write('HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n\r\n');
    answer(
      (c) => socket.write(c),
      (f) => socket.on('drain', f),
      () => socket.destroyed,
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  const api = {
    requestOptions: async () => ({ headers: {} }),
    url: (p: string, ws?: string) => new URL(`${ws ? 'ws' : 'http'}://127.0.0.1:${port}${p}`),
  } as unknown as ApiConnection;
  const began = Date.now();
  const answers = await probeProtocols(api, { namespace: 'a', name: 'b', port: 80 }, 20_000);
  assert.ok(Date.now() - began < 10_000, `answered after ${Date.now() - began} ms`);
  for (const a of answers) {
    assert.equal(a.offered, false, a.protocol);
    assert.match(a.answer, /400.*upgrade refused here/, a.protocol);
  }
});

test('legacy SPDY upgraded without the port-forward protocol version is not offered (kubectl refuses it)', async (t) => {
  let version = '';
  const server = http.createServer((_req, res) => res.writeHead(404).end());
  server.on('upgrade', (req, socket) => {
    socket.on('error', () => undefined);
    if (req.headers.upgrade !== 'SPDY/3.1') return void socket.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n');
    socket.end(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n${version ? `X-Stream-Protocol-Version: ${version}\r\n` : ''}\r\n`,
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const { port } = server.address() as AddressInfo;
  const api = {
    requestOptions: async () => ({ headers: {} }),
    url: (p: string, ws?: string) => new URL(`${ws ? 'ws' : 'http'}://127.0.0.1:${port}${p}`),
  } as unknown as ApiConnection;
  const spdy = async () => (await probeProtocols(api, { namespace: 'a', name: 'b', port: 80 }, 5_000)).find((a) => a.protocol === 'spdy')!;
  assert.deepEqual(await spdy(), { protocol: 'spdy', offered: false, answer: '101 SPDY/3.1 (no X-Stream-Protocol-Version)', status: 0 });
  version = 'portforward.k8s.io';
  assert.deepEqual(await spdy(), { protocol: 'spdy', offered: true, answer: '101 SPDY/3.1 portforward.k8s.io', status: 0 });
});
