// v4 port-forward streams (one WebSocket each) after the process was paused (a laptop asleep):
// their connections may be dead without a sign, and the keepalive would take up to its interval
// plus its timeout (25 s by default) to notice; SPDY tunnels are checked within seconds. In-process
// against the simulated cluster, reached through a relay that can go silent.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startFreezableProxy, type FreezableProxy } from '../helpers/freezable-proxy.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { createLogger } from '../../src/core/log.js';
import { WebSocketV4Transport } from '../../src/tunnel/websocket-v4.js';
import type { PodPort } from '../../src/tunnel/transport.js';
import { SAMPLE } from '../sim/sample.js';

const echo: PodPort = { namespace: 'data', pod: SAMPLE.echo.pods[0], port: 7000 };
let cluster: TestCluster;
let relay: FreezableProxy;
let api: ApiConnection;

before(async () => {
  cluster = await startTestCluster();
  relay = await startFreezableProxy(Number(new URL(cluster.sim.server).port));
  const kubeconfig = path.join(cluster.dir, 'kc-relay');
  await writeFile(kubeconfig, cluster.sim.kubeconfigYaml({ server: relay.url }), { mode: 0o600 });
  api = new ApiConnection(loadKubeConfig({ kubeconfig }).kc);
});

after(async () => {
  cluster?.sim.endLingeringStreams();
  await relay?.close();
  await cluster?.close();
});

async function roundTrip(s: Duplex, text: string): Promise<string> {
  const back = new Promise<string>((resolve, reject) => {
    s.once('data', (d: Buffer) => resolve(d.toString()));
    s.once('error', reject);
  });
  s.write(text);
  return back;
}

/** How the stream ended, or 'still open' after `ms`. */
function outcome(s: Duplex, ms: number): Promise<string> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('still open'), ms);
    s.once('error', (err) => (clearTimeout(timer), resolve(`error: ${err.message}`)));
    s.once('end', () => (clearTimeout(timer), resolve('end')));
  });
}

test('after a pause, a stream that answers lives on and one gone silent fails within the check', async () => {
  const t = new WebSocketV4Transport(api, createLogger('silent'));
  try {
    const live = await t.open(echo, { signal: AbortSignal.timeout(5000), confirmMs: 0 });
    t.afterPause(300);
    assert.equal(await outcome(live, 800), 'still open');
    assert.equal(await roundTrip(live, 'alive'), 'alive');
    live.destroy();
    const dead = await t.open(echo, { signal: AbortSignal.timeout(5000), confirmMs: 0 });
    assert.equal(await roundTrip(dead, 'before'), 'before');
    // The laptop slept; the path to the API server is gone, and nothing says so.
    assert.ok(relay.freeze() >= 1);
    t.afterPause(300);
    assert.match(await outcome(dead, 3000), /^error: .*no answer to a ping after the process was paused/);
  } finally {
    await t.close();
  }
});
