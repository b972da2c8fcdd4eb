// What stands in front of an API server answers in ways the API server never does: gzip nobody
// asked for is read as kubectl reads it. Against local servers; test/integration/real-cluster-fronts.test.ts puts a
// front before the real API server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import zlib from 'node:zlib';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { apiGet, closeAgents, listPage, streamEvents, type RawWatchEvent } from '../../src/cluster/list-watch.js';
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
  await streamEvents(res, (e) => seen.push(e));
  assert.deepEqual(
    seen.map((e) => e.type),
    ['ADDED', 'BOOKMARK'],
  );
});
