// A route whose API server was away when the proxy started (its context pointed at an address
// the cluster had left: a control plane moved while the proxy was down) retries in the background
// from the kubeconfig as it was. Once the kubeconfig names the cluster where it now is, the proxy
// takes it by itself (as for a ready route whose server went away), without a reload.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { addWhich, startClusters, type MultiCluster } from '../helpers/multi-cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';

let multi: MultiCluster;
let proxy: ProxyProcess | undefined;

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  await addWhich(multi.clusters[1]!);
  const closed = http.createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const deadPort = (closed.address() as { port: number }).port;
  closed.close();
  await multi.writeKubeconfig({ staging: { server: `https://127.0.0.1:${deadPort}` } });
  const args = ['--kubeconfig', multi.kubeconfig, '--context', 'prod', '--context', 'staging', '--listen-socks', '127.0.0.1:0', '--log-level', 'debug'];
  proxy = await startProxyProcess(args);
});

after(async () => {
  await proxy?.stop();
  await multi.close();
});

test('a route down since the start takes the kubeconfig that names its server anew', { timeout: 30_000 }, async () => {
  const ask = () => curl(['--max-time', '3', '--proxy', `socks5h://${proxy!.socks}`, 'http://which.shop.staging/']);
  assert.notEqual((await ask()).code, 0, 'down: its server is not where the kubeconfig says');
  await multi.writeKubeconfig();
  const t0 = Date.now();
  for (;;) {
    const r = await ask();
    if (r.code === 0 && /hello from which-staging /.test(r.stdout)) break;
    assert.ok(Date.now() - t0 < 15_000, `not served within 15 s of the kubeconfig's fix: ${r.stderr}`);
    await delay(200);
  }
  console.log(`# served ${Date.now() - t0} ms after the kubeconfig named its server`);
});
