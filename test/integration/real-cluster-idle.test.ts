// Idle streams on a node whose kubelet closes port-forward connections idle for its
// --streaming-connection-idle-timeout (default 4 h; hardened nodes set minutes; here 3 s): a
// stream idle for longer must still carry data afterwards under both transports, as through
// `kubectl port-forward` (client-go's SPDY pings reach the kubelet). Over SPDY our PINGs do the
// same; the kubelet's v4 WebSocket handler counts data messages only, not pings. Skips with a
// reason when the real-cluster binaries are not built.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { manifests, pod, service } from '../helpers/real-cluster-objects.js';
import { endpointSlicesCaughtUp, startClusterLogged, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect, Reader } from '../helpers/socks-client.js';

const skip = skipUnlessRealCluster();

const TRANSPORTS = ['spdy', 'websocket'] as const;
type Transport = (typeof TRANSPORTS)[number];
const KUBELET_IDLE_MS = 3_000;

let cluster: RealCluster | undefined;
const proxies = new Map<Transport, ProxyProcess>();

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged({ nodeFlags: [`--streaming-connection-idle-timeout=${KUBELET_IDLE_MS}ms`] }, ', kubelet idle timeout 3 s');
  await cluster.kubectl(['apply', '-f', '-'], {
    input: manifests(
      pod({ name: 'echo', containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ containerPort: 7000 }] }] }),
      service('echo', { ports: [{ port: 7000, targetPort: 7000 }] }),
    ),
  });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/echo', '--timeout=60s']);
  // Ready pods are ready endpoints only once the EndpointSlice controller says so (later, when loaded).
  await endpointSlicesCaughtUp(cluster);
  for (const t of TRANSPORTS) {
    const args = ['--kubeconfig', cluster.kubeconfig, '--namespace', 'shop', '--listen-socks', '127.0.0.1:0', '--no-direct', '--transport', t];
    proxies.set(t, await startProxyProcess([...args, '--keepalive', '1s', '--log-level', 'debug']));
  }
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

for (const transport of TRANSPORTS) {
  test(`${transport}: a stream idle for three times the kubelet's idle timeout still echoes`, { skip }, async () => {
    const { reply, socket, rest } = await socks5Connect(proxies.get(transport)!.socks!, 'echo', 7000);
    assert.equal(reply, 0);
    socket.unshift(rest);
    const reader = new Reader(socket);
    socket.write('before');
    assert.equal((await reader.read(6)).toString(), 'before');
    await delay(3 * KUBELET_IDLE_MS);
    socket.write('after');
    assert.equal((await reader.read(5, 5_000)).toString(), 'after', 'the stream outlived the idle timeout');
    socket.destroy();
  });
}
