// cluster/plain-http.ts: a kubeconfig whose server is http:// (`kubectl proxy`, a development
// cluster's insecure port) works as it does for kubectl, without insecure-skip-tls-verify.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { listPage } from '../../src/cluster/list-watch.js';
import { scratchDir } from '../helpers/scratch-dir.js';

test('an http:// server without insecure-skip-tls-verify is asked, with the credentials, as kubectl asks it', async (t) => {
  const seen: Array<string | undefined> = [];
  const server = http.createServer((req, res) => {
    seen.push(req.headers.authorization);
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(req.url === '/version' ? '{"gitVersion":"v1.31.0"}' : '{"kind":"PodList","items":[],"metadata":{"resourceVersion":"7"}}');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const { port } = server.address() as AddressInfo;
  const file = path.join(scratchDir('proxyout-plain-http-'), 'config');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {server: "http://127.0.0.1:${port}"}}]`,
      'users: [{name: u, user: {token: t0k}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
      '',
    ].join('\n'),
  );
  const api = new ApiConnection(loadKubeConfig({ kubeconfig: file }).kc, { env: {} });
  assert.deepEqual(await api.getJson('/version', 10_000), { gitVersion: 'v1.31.0' });
  const page = await listPage(api, '/api/v1/pods', 500, undefined, AbortSignal.timeout(10_000), 10_000);
  assert.equal(page.resourceVersion, '7');
  assert.deepEqual(seen, ['Bearer t0k', 'Bearer t0k']);
});
