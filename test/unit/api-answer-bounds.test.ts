// ApiConnection.getJson reads a bounded answer: a hostile or broken API server that never ends its
// body (a 403 streaming for ever) must not grow doctor's or the proxy's memory without end. So do
// a LIST page and a GET of one object (list-watch.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createGzip } from 'node:zlib';
import { listPage } from '../../src/cluster/list-watch.js';
import { UpgradeRefusal, upgradeToWebSocket } from '../../src/tunnel/websocket/handshake.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection, ApiStatusError } from '../../src/cluster/api.js';
import { scratchDir } from '../helpers/scratch-dir.js';
import { writeOneUserKubeconfig } from '../helpers/one-user-kubeconfig.js';

async function endlessServer(status: number, start: string): Promise<{ api: ApiConnection; sent: () => number; close: () => void }> {
  let sent = 0;
  const server = http.createServer((_req, res) => {
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.write(start);
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    const more = () => {
      while (!res.destroyed && res.write(chunk)) sent += chunk.length;
      if (!res.destroyed) res.once('drain', more);
    };
    res.on('close', () => res.removeAllListeners('drain'));
    more();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  const file = writeOneUserKubeconfig(scratchDir('proxyout-api-bounds-'), '{token: t}', { server: `http://127.0.0.1:${port}` });
  return { api: new ApiConnection(loadKubeConfig({ kubeconfig: file }).kc, { env: {} }), sent: () => sent, close: () => server.close() };
}

test('an error answer that never ends is cut after its start: the Status message is what came first', { timeout: 30_000 }, async (t) => {
  const s = await endlessServer(403, '{"kind":"Status","message":"pods is forbidden: User \\"u\\" cannot list');
  t.after(s.close);
  await assert.rejects(
    s.api.getJson('/api/v1/pods', 20_000),
    (err: unknown) => err instanceof ApiStatusError && err.statusCode === 403 && /^pods is forbidden: User "u" cannot list *…$/.test(err.message),
  );
  assert.ok(s.sent() < 16 * 1024 * 1024, `read ${s.sent()} bytes of an endless error answer`);
});

test('a document that never ends is refused once it passes the bound, naming the path', { timeout: 30_000 }, async (t) => {
  const s = await endlessServer(200, '{"kind":"APIVersions","versions":["v1"');
  t.after(s.close);
  await assert.rejects(
    s.api.getJson('/api', 60_000),
    (err: unknown) => err instanceof ApiStatusError && /the answer to \/api is larger than 64 MiB/.test(err.message),
  );
});

test('a LIST page larger than any real one fails its request, naming the path, and the process lives on', { timeout: 60_000 }, async (t) => {
  // 600 MiB once decoded (gzip: small on the wire): past V8's longest string, whose overflow threw
  // ERR_STRING_TOO_LONG out of the response's 'end' handler and ended the process.
  let sent = 0;
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' });
    const gzip = createGzip({ level: 1 });
    gzip.pipe(res);
    res.on('close', () => gzip.destroy());
    gzip.write('{"kind":"PodList","items":[],"metadata":{"resourceVersion":"1"},"padding":"');
    const chunk = Buffer.alloc(1024 * 1024, 0x61);
    const more = () => {
      while (!res.destroyed && sent < 600 * 1024 * 1024) {
        sent += chunk.length;
        if (!gzip.write(chunk)) return void gzip.once('drain', more);
      }
      if (!res.destroyed) gzip.end('"}');
    };
    more();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const port = (server.address() as AddressInfo).port;
  const file = writeOneUserKubeconfig(scratchDir('proxyout-api-bounds-'), '{token: t}', { server: `http://127.0.0.1:${port}` });
  const api = new ApiConnection(loadKubeConfig({ kubeconfig: file }).kc, { env: {} });
  await assert.rejects(
    listPage(api, '/api/v1/pods', 500, undefined, AbortSignal.timeout(50_000), 10_000),
    (err: unknown) => err instanceof ApiStatusError && /the answer to \/api\/v1\/pods is larger than 256 MiB/.test(err.message),
  );
  assert.ok(sent < 600 * 1024 * 1024, `the server sent all ${sent} bytes: the page was read to its end`);
});

test("a LIST's refusal that never ends is answered from its start at once, not at the headers' deadline", { timeout: 30_000 }, async (t) => {
  const s = await endlessServer(403, '{"kind":"Status","message":"pods is forbidden: User \\"u\\" cannot list');
  t.after(s.close);
  const began = Date.now();
  await assert.rejects(
    listPage(s.api, '/api/v1/pods', 500, undefined, AbortSignal.timeout(25_000), 10_000),
    (err: unknown) => err instanceof ApiStatusError && err.statusCode === 403 && /^pods is forbidden: User "u" cannot list/.test(err.message),
  );
  assert.ok(Date.now() - began < 5_000, `answered after ${Date.now() - began} ms, not from the body's start`);
});

test("headers past Node's 16 KiB (a front's cookies, many warnings) are read, as kubectl reads them", async (t) => {
  const warnings = Array.from({ length: 400 }, (_, i) => `299 - "thing ${i} is deprecated and goes away in a later release"`);
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json', Warning: warnings });
    res.end(req.headers.upgrade ? '' : '{"gitVersion":"v1.31.0"}');
  });
  server.on('upgrade', (_req, socket) =>
    socket.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n' + warnings.map((w) => `Warning: ${w}\r\n`).join('') + '\r\n'),
  );
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const port = (server.address() as AddressInfo).port;
  const file = writeOneUserKubeconfig(scratchDir('proxyout-api-bounds-'), '{token: t}', { server: `http://127.0.0.1:${port}` });
  const api = new ApiConnection(loadKubeConfig({ kubeconfig: file }).kc, { env: {} });
  assert.deepEqual(await api.getJson('/version', 10_000), { gitVersion: 'v1.31.0' });
  const page = await listPage(api, '/api/v1/pods', 500, undefined, AbortSignal.timeout(10_000), 10_000).catch((err: unknown) => err);
  assert.ok(!(page instanceof Error), String(page));
  // The tunnel's upgrade takes the same options: its refusal is read, not a parse error.
  await assert.rejects(
    upgradeToWebSocket(api.url('/x', 'ws'), await api.requestOptions(), 'v4.channel.k8s.io', 10_000),
    (err: unknown) => err instanceof UpgradeRefusal && err.status === 403,
  );
});
