// The proxy's watch cache against changes a real control plane makes while clients hold streams
// and reach pods by IP (test/helpers/real-cluster.ts): real kubectl drives the change, the real
// CLI serves, and what a client reaches is judged by the pod that answers (proxyout/http names its
// pod and UID). Skips with a reason when the test bed is not built.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { manifests, pod, service } from '../helpers/real-cluster-objects.js';
import { applyAndRollOut, startClusterLogged, startProxies, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { Reader, socks5Connect } from '../helpers/socks-client.js';
import { eventually } from '../helpers/cluster.js';

const skip = skipUnlessRealCluster();

const MANIFESTS = manifests(
  pod({ name: 'echo', containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ name: 'echo', containerPort: 7000 }] }] }),
  service('echo', { ports: [{ name: 'echo', port: 7000 }] }),
);

let cluster: RealCluster | undefined;
let proxies = new Map<'spdy', ProxyProcess>();

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  await cluster.kubectl(['apply', '-f', '-'], { input: MANIFESTS });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/echo', '--timeout=60s']);
  // Again, to wait for the EndpointSlices to list the ready pods too.
  await applyAndRollOut(cluster, MANIFESTS, []);
  proxies = await startProxies(cluster, ['spdy'] as const);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

const socks = () => proxies.get('spdy')!.socks!;

test('a pod relabelled out of its Service runs on: a stream held to it through the Service stays open', { skip }, async () => {
  const s = await socks5Connect(socks(), 'echo.shop', 7000);
  assert.equal(s.reply, 0);
  const reader = new Reader(s.socket);
  const echo = async (text: string) => {
    s.socket.write(text);
    return (await reader.read(text.length, 3_000).catch((err: Error) => err.message)).toString();
  };
  assert.equal(await echo('one'), 'one');
  try {
    // Taken out of rotation for a look, as one does: the EndpointSlice drops it, the pod runs on.
    await cluster!.kubectl(['-n', 'shop', 'label', 'pod', 'echo', 'app=echo-debug', '--overwrite']);
    // The proxy saw the slice change once the Service has no endpoint for it (0x04).
    await eventually(async () => {
      const probe = await socks5Connect(socks(), 'echo.shop', 7000);
      probe.socket.destroy();
      return probe.reply === 4;
    });
    assert.equal(await echo('two'), 'two', 'the stream to the running pod is not cut');
  } finally {
    s.socket.destroy();
    await cluster!.kubectl(['-n', 'shop', 'label', 'pod', 'echo', 'app=echo', '--overwrite']);
  }
});
