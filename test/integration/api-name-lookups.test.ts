// Each stream over the per-stream v4 WebSocket is a new connection to the API server. Its name is
// looked up with getaddrinfo on libuv's threadpool, where slow work such as that gets two threads
// by default (the direct route's look-ups share them): a burst of streams must not queue one
// look-up of the same name per stream there. Counted through dns.lookup, which net calls.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import dns from 'node:dns';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { createLogger } from '../../src/core/log.js';
import { WebSocketV4Transport } from '../../src/tunnel/websocket-v4.js';
import type { PodPort } from '../../src/tunnel/transport.js';
import { SAMPLE } from '../sim/sample.js';

const echo: PodPort = { namespace: 'data', pod: SAMPLE.echo.pods[0], port: 7000 };
const STREAMS = 20;
let cluster: TestCluster;
let api: ApiConnection;

before(async () => {
  cluster = await startTestCluster();
  const kubeconfig = path.join(cluster.dir, 'kc-localhost');
  const port = new URL(cluster.sim.server).port;
  // By name (the serving certificate names localhost), so each connection has a name to look up.
  await writeFile(kubeconfig, cluster.sim.kubeconfigYaml({ server: `https://localhost:${port}` }), { mode: 0o600 });
  api = new ApiConnection(loadKubeConfig({ kubeconfig }).kc);
});

after(async () => {
  cluster?.sim.endLingeringStreams();
  await cluster?.close();
});

test('a burst of per-stream WebSockets looks the API server name up once, not once per stream', async () => {
  const t = new WebSocketV4Transport(api, createLogger('silent'));
  const original = dns.lookup;
  let lookups = 0;
  (dns as { lookup: unknown }).lookup = function (this: unknown, hostname: string, ...rest: unknown[]) {
    if (hostname === 'localhost') lookups++;
    return (original as (...a: unknown[]) => unknown).call(this, hostname, ...rest);
  };
  try {
    await api.requestOptions();
    const streams = await Promise.all(Array.from({ length: STREAMS }, () => t.open(echo, { signal: AbortSignal.timeout(10_000), confirmMs: 0 })));
    assert.equal(streams.length, STREAMS);
    for (const s of streams) s.destroy();
    assert.ok(lookups >= 1, 'the name was looked up');
    assert.ok(lookups <= 2, `${lookups} look-ups of the API server's name for ${STREAMS} streams opened together`);
  } finally {
    (dns as { lookup: unknown }).lookup = original;
    await t.close();
  }
});
