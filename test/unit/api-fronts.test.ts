// What stands in front of an API server answers in ways the API server never does: gzip nobody
// asked for, an HTML page, a redirect to a sign-in page, or HTTP/2 only. Each is either read as
// kubectl reads it (gzip) or said plainly (not "invalid JSON", not `<!DOCTYPE html>`, not a
// 10-second wait). Against local servers; test/integration/real-cluster-fronts.test.ts puts a
// front before the real API server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import http2 from 'node:http2';
import zlib from 'node:zlib';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection, ApiStatusError, statusMessage } from '../../src/cluster/api.js';
import { apiGet, closeAgents, listPage, streamEvents, type RawWatchEvent } from '../../src/cluster/list-watch.js';
import { SimPki } from '../sim/pki.js';
import { scratchDir } from '../helpers/scratch-dir.js';
import { writeOneUserKubeconfig } from '../helpers/one-user-kubeconfig.js';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

async function front(handler: Handler): Promise<{ api: ApiConnection; close: () => void }> {
  const server = http.createServer(handler);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  const file = writeOneUserKubeconfig(scratchDir('proxyout-api-fronts-'), '{token: t}', { server: `http://127.0.0.1:${port}/k8s/clusters/c-1` });
  const api = new ApiConnection(loadKubeConfig({ kubeconfig: file }).kc, { env: {} });
  return {
    api,
    close: () => {
      closeAgents(api);
      server.closeAllConnections();
      server.close();
    },
  };
}

const HTML = '<!DOCTYPE html>\n<html><head><title>Rancher</title></head><body>sign in</body></html>\n';

test('a front that gzips answers nobody asked to be gzipped: read as kubectl reads them', { timeout: 20_000 }, async (t) => {
  const events = ['{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n', '{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}\n'];
  const f = await front((req, res) => {
    assert.equal(req.headers['accept-encoding'], undefined, 'gzip is not asked for');
    res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' });
    if (req.url?.includes('watch=1')) {
      // Each event flushed on its own, the second cut mid-way: events must not wait for the end.
      const gz = zlib.createGzip();
      gz.pipe(res);
      gz.write(events[0]);
      gz.flush(() => {
        gz.write(events[1]!.slice(0, 20));
        gz.flush(() => setTimeout(() => gz.end(events[1]!.slice(20)), 50));
      });
      return;
    }
    const body = req.url?.startsWith('/k8s/clusters/c-1/api/v1/pods')
      ? '{"metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"p"}}]}'
      : '{"kind":"APIVersions","versions":["v1"]}';
    res.end(zlib.gzipSync(body));
  });
  t.after(f.close);
  assert.deepEqual(await f.api.getJson('/api'), { kind: 'APIVersions', versions: ['v1'] });
  const page = await listPage(f.api, '/api/v1/pods', 500, undefined, AbortSignal.timeout(5_000), 5_000);
  assert.equal(page.resourceVersion, '7');
  assert.equal(page.items.length, 1);
  const res = await apiGet(f.api, '/api/v1/pods?watch=1', AbortSignal.timeout(5_000), 5_000);
  const seen: RawWatchEvent[] = [];
  await streamEvents(res, (e) => seen.push(e), '/api/v1/pods');
  assert.deepEqual(
    seen.map((e) => e.type),
    ['ADDED', 'BOOKMARK'],
  );
});

test('an HTML page or a redirect to a sign-in page is named as such, not "invalid JSON"', { timeout: 20_000 }, async (t) => {
  const f = await front((req, res) => {
    if (req.url?.endsWith('/api')) return res.writeHead(200, { 'Content-Type': 'text/html' }).end(HTML);
    if (req.url?.includes('/pods'))
      return res.writeHead(302, { Location: 'https://login.example/sso?session=SECRET-42', 'Content-Type': 'text/html' }).end(HTML);
    res.writeHead(403, { 'Content-Type': 'text/html' }).end('<html><body><h1>Access denied</h1></body></html>');
  });
  t.after(f.close);
  const message = (err: unknown) => (err instanceof ApiStatusError ? err.message : String(err));
  await assert.rejects(f.api.getJson('/api'), (err: unknown) => {
    assert.match(
      message(err),
      /^\/api answered with an HTML page "Rancher" \(not the API server: a proxy, load balancer or sign-in page in front of it answered\)$/,
    );
    return true;
  });
  for (const attempt of [() => f.api.getJson('/api/v1/pods'), () => listPage(f.api, '/api/v1/pods', 500, undefined, AbortSignal.timeout(5_000), 5_000)]) {
    await assert.rejects(attempt(), (err: unknown) => {
      assert.equal((err as ApiStatusError).statusCode, 302);
      assert.match(
        message(err),
        /^a redirect to https:\/\/login\.example\/sso \(not the API server: .*; log in there, or check the server URL in the kubeconfig\)$/,
      );
      assert.doesNotMatch(message(err), /SECRET/, 'the query (a session) is left out');
      return true;
    });
  }
  await assert.rejects(f.api.getJson('/apis'), (err: unknown) => /^an HTML page "Access denied" \(not the API server/.test(message(err)));
  // The API server's own answers are unchanged.
  assert.equal(statusMessage('{"kind":"Status","message":"pods is forbidden"}'), 'pods is forbidden');
  assert.equal(statusMessage('404 page not found\n'), '404 page not found');
});

test('a server that speaks only HTTP/2 is refused at the handshake and said so, at once', { timeout: 20_000 }, async (t) => {
  const { keyPem, certPem } = new SimPki().servingCert();
  const server = http2.createSecureServer({ key: keyPem, cert: certPem, allowHTTP1: false }, (_req, res) => res.end('{}'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const port = (server.address() as AddressInfo).port;
  const file = writeOneUserKubeconfig(scratchDir('proxyout-api-h2-'), '{token: t}', { server: `https://127.0.0.1:${port}` });
  const api = new ApiConnection(loadKubeConfig({ kubeconfig: file }).kc, { env: {} });
  const started = Date.now();
  await assert.rejects(api.getJson('/api', 15_000), /refused HTTP\/1\.1 in the TLS handshake \(it offers only HTTP\/2\)/);
  assert.ok(Date.now() - started < 3_000, `refused after ${Date.now() - started} ms`);
  await assert.rejects(apiGet(api, '/api/v1/pods?watch=1', AbortSignal.timeout(15_000), 15_000), /offers only HTTP\/2/);
});
