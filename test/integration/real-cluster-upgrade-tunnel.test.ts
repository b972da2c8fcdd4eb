// A cluster upgraded under a running proxy gets its SPDY tunnel back. The API server starts with
// PortForwardWebsockets off behind a node that does not tunnel (as a ≤ 1.29 control plane):
// `--transport auto` learns to use one WebSocket per stream. The API server is then restarted
// with the gate on (as after an upgrade): once the remembered answer is old enough (10 min, here
// shortened by PROXYOUT_TEST_RELEARN_TRANSPORT_MS) one stream asks again and the tunnel carries
// the streams from then on. Skips with a reason when the real-cluster binaries are not built.
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { manifests, pod } from '../helpers/real-cluster-objects.js';
import { endpointSlicesCaughtUp, startClusterLogged, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';

const skip = skipUnlessRealCluster();
const RELEARN_MS = 1_000;
const ECHO = pod({ name: 'echo', containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ containerPort: 7000 }] }] });

let cluster: RealCluster | undefined;
let proxy: ProxyProcess | undefined;
let echoIP = '';

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged(
    { apiServerFlags: ['--feature-gates=PortForwardWebsockets=false'], nodeFlags: ['--websocket-tunnel=false'] },
    ' (PortForwardWebsockets off, a node that does not tunnel)',
  );
  await cluster.kubectl(['apply', '-f', '-'], { input: manifests(ECHO) });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/echo', '--timeout=60s']);
  await endpointSlicesCaughtUp(cluster);
  echoIP = (await cluster.get<{ status: { podIP: string } }>('/api/v1/namespaces/shop/pods/echo')).status.podIP;
  const args = ['--kubeconfig', cluster.kubeconfig, '--namespace', 'shop', '--listen-socks', '127.0.0.1:0', '--log-level', 'debug', '--transport', 'auto'];
  proxy = await startProxyProcess(args, { env: { PROXYOUT_TEST_RELEARN_TRANSPORT_MS: String(RELEARN_MS) } });
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, new Map(proxy ? [['auto', proxy]] : []));
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

/** One echo through SOCKS5; the transport the proxy's `stream open` line names for it. */
async function echoTransport(): Promise<unknown> {
  const before = proxy!.logs.length;
  const { reply, socket, rest } = await socks5Connect(proxy!.socks!, echoIP, 7000);
  assert.equal(reply, 0, 'SOCKS reply');
  const chunks: Buffer[] = [rest];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.resume();
  socket.write('ping');
  while (Buffer.concat(chunks).toString() !== 'ping') await delay(10);
  socket.destroy();
  return proxy!.logs.slice(before).find((l) => l.msg === 'stream open')?.transport;
}

test('auto: a cluster that gains the tunnel under a running proxy gets it back', { timeout: 40_000 }, async (t: TestContext) => {
  if (skip) return t.skip(skip);
  assert.equal(await echoTransport(), 'websocket', 'no tunnel at first');
  assert.equal(await echoTransport(), 'websocket', 'the answer is remembered');
  await cluster!.restartApiServer({ apiServerFlags: [] });
  await delay(RELEARN_MS);
  assert.equal(await echoTransport(), 'spdy', 'asked again: the upgraded API server offers the tunnel');
  assert.equal(await echoTransport(), 'spdy');
  assert.ok(proxy!.logs.some((l) => l.msg === 'the API server offers the SPDY port-forward tunnel now; using it for this cluster'));
});
