// api-reachability.ts and the route's health (routes/guest-cluster/health.ts): what a route decides
// on must be the freshest evidence. A probe sent while the API server was away can fail after
// something else (a port-forward) got an answer, and a health check can be a second old.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import { KubeConfig } from '@kubernetes/client-node';
import { ApiConnection } from '../../src/cluster/api.js';
import { ApiReachability } from '../../src/cluster/api-reachability.js';
import type { ClusterCache } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { RouteHealth } from '../../src/routes/guest-cluster/health.js';

/** A server whose /readyz is held until release(), then answered by a reset (no HTTP answer), or with 200. */
async function heldReadyz(): Promise<{ api: ApiConnection; probes: () => number; release(answer: 'reset' | 'ok'): void; close(): Promise<void> }> {
  const held: Array<http.ServerResponse> = [];
  let probes = 0;
  const server = http.createServer((req, res) => {
    if (req.url !== '/readyz') return void res.writeHead(404).end();
    probes++;
    held.push(res);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as { port: number }).port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
    currentContext: 'c',
  });
  return {
    api: new ApiConnection(kc),
    probes: () => probes,
    release(answer) {
      for (const res of held.splice(0)) {
        if (answer === 'reset') res.socket?.destroy();
        else res.writeHead(200).end('ok');
      }
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

async function until(what: string, check: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('a probe that fails after an answer seen meanwhile does not mark the server away', async (t) => {
  const s = await heldReadyz();
  t.after(() => s.close());
  const reach = new ApiReachability(s.api, 60_000);
  reach.suspect(); // a dead tunnel: probe now
  await until('the probe is sent', () => s.probes() === 1);
  // Meanwhile a port-forward opened through the server (routes/cluster/route.ts).
  await new Promise((r) => setTimeout(r, 5));
  reach.sawAnswer();
  s.release('reset');
  // The stale failure is dropped; a fresh one (sent after the answer) still counts.
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual([reach.last?.answered, reach.last?.serving], [true, true], 'the answer seen after the probe was sent stands');
  reach.suspect();
  await until('the second probe is sent', () => s.probes() === 2);
  s.release('reset');
  await until('the fresh failure is recorded', () => reach.last?.answered === false);
  assert.equal(reach.last?.serving, false);
});

test('a route degraded because its API server did not answer serves again at the next stream once it answers, not at the next check', async (t) => {
  const s = await heldReadyz();
  t.after(() => s.close());
  const api = s.api;
  const reach = ApiReachability.of(api);
  const health = new RouteHealth('cluster', api, 'https://api.test', { failingWatches: () => [] } as unknown as ClusterCache, createLogger('silent'));
  reach.suspect();
  await until('the probe is sent', () => s.probes() === 1);
  s.release('reset');
  await until('the probe finds no answer', () => reach.last?.answered === false);
  assert.equal(health.check()?.unreachable, true, 'degraded: no answer');
  // A port-forward opens (the server is back) before the once-a-second check runs again.
  reach.sawAnswer();
  assert.equal(health.current?.unreachable, true, 'the last check still says so');
  assert.equal(health.currentRechecked(), undefined, 'what a new stream reads (routes/cluster/route.ts open())');
  assert.equal(health.current, undefined);
});
