// hostNetwork pods carry their node's IP, so "<node IP>:port" is a port in the node's own network
// namespace, not a pod's. The proxy refuses such Pod-IP targets (SOCKS 0x02 / HTTP 403, naming the
// opt-in) unless it runs with --allow-host-network-pods; a Service whose endpoints are hostNetwork
// pods works by name either way. The real CLI against the simulated cluster, real curl.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';

let cluster: TestCluster;
let nodeIp: string;
const PORT = 9100;

before(async () => {
  cluster = await startTestCluster();
  await cluster.sim.createPod({
    namespace: 'shop',
    name: 'node-exporter-x7k2p',
    labels: { app: 'node-exporter' },
    hostNetwork: true,
    ports: [{ containerPort: PORT, backend: 'http' }],
  });
  await cluster.sim.createService({ namespace: 'shop', name: 'node-exporter', selector: { app: 'node-exporter' }, ports: [{ port: PORT, targetPort: PORT }] });
  nodeIp = cluster.sim.podIP('shop', 'node-exporter-x7k2p');
});

after(async () => {
  await cluster?.close();
});

async function withProxy(extra: string[], fn: (p: ProxyProcess) => Promise<void>): Promise<void> {
  const p = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0', ...extra]);
  try {
    await fn(p);
  } finally {
    assert.equal(await p.stop(), 0);
  }
}

const dashed = () => `${nodeIp.replace(/\./g, '-')}.shop.pod.cluster.local`;

test('a node IP (only hostNetwork pods have it) is refused as a Pod IP, saying why and naming the opt-in; no port-forward is made', async () => {
  await withProxy([], async (p) => {
    const before = cluster.sim.counters.portForward;
    for (const target of [nodeIp, dashed()]) {
      const socks = await socks5Connect(p.socks!, target, PORT);
      socks.socket.destroy();
      assert.equal(socks.reply, 0x02, `${target} over SOCKS5`);
      const http = await curl(['--proxy', `http://${p.http}`, '--write-out', '%{http_code}', `http://${target}:${PORT}/`]);
      assert.match(http.stdout, /403$/, `${target} over HTTP`);
      assert.match(http.stdout, /node IP.*hostNetwork.*--allow-host-network-pods/s);
    }
    assert.equal(cluster.sim.counters.portForward, before, 'nothing reached the node');
    // The Service those pods back is what a Service is for: reachable by name and ClusterIP.
    const bySocks = await curl(['--proxy', `socks5h://${p.socks}`, `http://node-exporter.shop.svc:${PORT}/`]);
    assert.equal(bySocks.code, 0, bySocks.stderr);
    assert.match(bySocks.stdout, /hello from node-exporter-x7k2p/);
    const byHttp = await curl(['--proxy', `http://${p.http}`, `http://node-exporter.shop.svc.cluster.local:${PORT}/`]);
    assert.match(byHttp.stdout, /hello from node-exporter-x7k2p/);
  });
});

test('with --allow-host-network-pods the node IP reaches the hostNetwork pod', async () => {
  await withProxy(['--allow-host-network-pods'], async (p) => {
    for (const target of [nodeIp, dashed()]) {
      const r = await curl(['--proxy', `socks5h://${p.socks}`, `http://${target}:${PORT}/`]);
      assert.equal(r.code, 0, `${target}: ${r.stderr}`);
      assert.match(r.stdout, /hello from node-exporter-x7k2p/);
    }
  });
});

test('with a direct route, the node IP is dialled directly (as without the proxy), not refused as a Pod IP', async () => {
  // The simulator's node IP is loopback: a direct route dials it only when its allow list names it.
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-hostnet-direct-'));
  const config = path.join(dir, 'routes.yaml');
  writeFileSync(config, 'routes:\n  - {name: direct, kind: direct, allow: [127.0.0.0/8]}\n');
  try {
    await withProxy(['--config', config, '--context', 'sim', '--direct'], async (p) => {
      const before = cluster.sim.counters.portForward;
      const r = await curl(['--proxy', `socks5h://${p.socks}`, `http://${nodeIp}:${PORT}/`]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /hello from node-exporter-x7k2p/, 'the node answered');
      assert.equal(cluster.sim.counters.portForward, before, 'directly: no port-forward into the node');
      // The pod form names the pod, not the node: still refused.
      const named = await socks5Connect(p.socks!, dashed(), PORT);
      named.socket.destroy();
      assert.equal(named.reply, 0x02);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('managed: connect --allow-host-network-pods honours the flag in the daemon', async () => {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-hostnet-'));
  const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir };
  try {
    const r = await runCli(['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--allow-host-network-pods', '--json'], { env });
    assert.equal(r.code, 0, r.stderr);
    const { id, env: vars } = JSON.parse(r.stdout) as { id: string; env: { ALL_PROXY: string } };
    const viaIp = await curl(['--proxy', vars.ALL_PROXY, `http://${nodeIp}:${PORT}/`]);
    assert.equal(viaIp.code, 0, viaIp.stderr);
    assert.match(viaIp.stdout, /hello from node-exporter-x7k2p/);
    assert.equal((await runCli(['disconnect', id], { env })).code, 0);
  } finally {
    await runCli(['quit'], { env });
    rmSync(stateDir, { recursive: true, force: true });
  }
});
