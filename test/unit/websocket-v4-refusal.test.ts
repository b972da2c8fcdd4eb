// tunnel/websocket-v4.ts: a refused upgrade whose body never ends (a misbehaving API server or a
// proxy in between) is answered from its first 16 KiB, not read for as long as it flows.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { WebSocketV4Transport } from '../../src/tunnel/websocket-v4.js';
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
