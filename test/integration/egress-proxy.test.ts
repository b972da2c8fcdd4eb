// The API server behind a TLS-intercepting corporate proxy: HTTPS_PROXY is honoured
// for the API connection, the proxy is named when it cannot be used, and its CA (--extra-ca /
// extraCA) makes it work — for API requests and for the port-forward WebSockets alike.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import net from 'node:net';
import { once } from 'node:events';
import { KubeConfig } from '@kubernetes/client-node';
import { ApiConnection } from '../../src/cluster/api.js';
import { loadExtraCA } from '../../src/cluster/egress-proxy.js';
import { probeApi } from '../../src/proxy/proxy.js';
import { dialTunnel } from '../../src/tunnel/spdy/tunnel.js';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startInterceptingProxy, type InterceptingProxy } from '../helpers/intercepting-proxy.js';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { SAMPLE } from '../sim/sample.js';

// A name only the proxy resolves (it serves the one upstream it knows): without the proxy,
// nothing would reach the API server under this name.
const API_HOST = 'api.corp.example';
let cluster: TestCluster;
let proxy: InterceptingProxy;
let kubeconfig: string;
let caFile: string;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startInterceptingProxy({ port: Number(new URL(cluster.sim.server).port), caPem: cluster.sim.caPem });
  kubeconfig = path.join(cluster.dir, 'kubeconfig-corp');
  await writeFile(kubeconfig, cluster.sim.kubeconfigYaml({ server: `https://${API_HOST}:6443`, namespace: 'shop' }), { mode: 0o600 });
  caFile = path.join(cluster.dir, 'corp-ca.pem');
  await writeFile(caFile, proxy.caPem);
});
after(async () => {
  await proxy?.close();
  await cluster?.close();
});

const kubeConfig = () => {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return kc;
};

test('without the proxy CA, the API check fails naming the proxy and what to do', async () => {
  const api = new ApiConnection(kubeConfig(), { env: { HTTPS_PROXY: proxy.url } });
  await assert.rejects(probeApi(api, 'sim', `https://${API_HOST}:6443`), (err: Error) => {
    assert.match(err.message, /cannot reach the API server https:\/\/api\.corp\.example:6443/);
    assert.ok(err.message.includes(`through proxy ${proxy.url}, from HTTPS_PROXY`), err.message);
    assert.match(err.message, /trust its CA with --extra-ca FILE/);
    return true;
  });
  assert.equal(proxy.connects.at(-1), `${API_HOST}:6443`);
});

test('the real CLI reads HTTPS_PROXY too, and says which proxy it used when it cannot start', async () => {
  const r = await runCli(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0'], { env: { HTTPS_PROXY: proxy.url, NO_PROXY: '' } });
  assert.notEqual(r.code, 0);
  assert.ok(r.stderr.includes(`through proxy ${proxy.url}, from HTTPS_PROXY`), r.stderr);
});

test('the real CLI with --extra-ca starts through that proxy and serves (the flag was once accepted and ignored)', async () => {
  const p = await startProxyProcess(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--extra-ca', caFile], {
    env: { HTTPS_PROXY: proxy.url, NO_PROXY: '' },
  });
  try {
    const r = await curl(['--proxy', `socks5h://${p.socks}`, 'http://web.shop:8080/']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /hello from web-/);
  } finally {
    await p.stop();
  }
  const missing = await runCli(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--extra-ca', path.join(cluster.dir, 'no-such-ca.pem')]);
  assert.notEqual(missing.code, 0);
  assert.match(missing.stderr, /extra CA/);
});

test('with --extra-ca the API requests and the port-forward WebSocket go through the proxy', async () => {
  const before = proxy.intercepted;
  const api = new ApiConnection(kubeConfig(), { env: { https_proxy: proxy.url }, extraCA: loadExtraCA(caFile) });
  const discovery = await api.getJson<{ kind: string }>('/api');
  assert.equal(discovery.kind, 'APIVersions');
  assert.deepEqual(api.egress, { proxy: proxy.url, source: 'https_proxy' });
  const pod = SAMPLE.web.pods[0]!;
  const ws = await dialTunnel(api.url(`/api/v1/namespaces/shop/pods/${pod}/portforward`, 'ws'), await api.requestOptions(), 10_000);
  ws.terminate();
  assert.ok(proxy.intercepted >= before + 2, `both connections were intercepted (${proxy.intercepted - before})`);
});

test('NO_PROXY naming the API server skips the proxy (and then this name resolves nowhere)', async () => {
  const count = proxy.connects.length;
  const api = new ApiConnection(kubeConfig(), { env: { HTTPS_PROXY: proxy.url, NO_PROXY: '.corp.example' }, extraCA: loadExtraCA(caFile) });
  await api.requestOptions();
  assert.deepEqual(api.egress, { source: 'NO_PROXY excludes api.corp.example' });
  assert.equal(proxy.connects.length, count);
});

test('via: every API connection is dialled through a route (host and port as the kubeconfig has them), TLS verified over it', async () => {
  const dialled: string[] = [];
  const simPort = Number(new URL(cluster.sim.server).port);
  const dial = async (host: string, port: number) => {
    dialled.push(`${host}:${port}`);
    const socket = net.connect(simPort, '127.0.0.1');
    await once(socket, 'connect');
    return socket;
  };
  // The sim's certificate names localhost, not api.corp.example: verification must refuse it…
  const strict = new ApiConnection(kubeConfig(), { via: { route: 'jump', dial } });
  await assert.rejects(strict.getJson('/api'), /(altnames|does not match|Hostname\/IP).*\(through route jump\)/);
  // …and accept it under a name it holds: a kubeconfig naming the server "localhost".
  const local = path.join(cluster.dir, 'kubeconfig-via');
  await writeFile(local, cluster.sim.kubeconfigYaml({ server: 'https://localhost:6443', namespace: 'shop' }), { mode: 0o600 });
  const kc = new KubeConfig();
  kc.loadFromFile(local);
  const proxied = proxy.connects.length;
  const api = new ApiConnection(kc, { via: { route: 'jump', dial }, env: { HTTPS_PROXY: proxy.url } });
  assert.equal((await api.getJson<{ kind: string }>('/api')).kind, 'APIVersions');
  const ws = await dialTunnel(api.url(`/api/v1/namespaces/shop/pods/${SAMPLE.web.pods[0]!}/portforward`, 'ws'), await api.requestOptions(), 10_000);
  ws.terminate();
  assert.deepEqual(api.egress, { proxy: 'route jump', source: 'via' });
  assert.equal(dialled[0], 'api.corp.example:6443');
  assert.ok(dialled.length >= 2 && dialled.slice(1).every((d) => d === 'localhost:6443'), dialled.join(', '));
  assert.equal(proxy.connects.length, proxied, 'via beats HTTPS_PROXY');
});
