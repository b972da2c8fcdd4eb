// A slow container runtime against the real API server and streaming server: the node stand-in
// waits (proxyout.test/dial-delay) before it dials the pod's port, as a runtime whose dial retries
// the SYN of a pod with a full accept backlog. A client that sends its request and half-closes
// (nc -N) must get the pod's answer under both transports, as through `kubectl port-forward`: the
// proxy's tear-down after the client's FIN must not run out while the pod is still being dialled.
// Skips with a reason when the real-cluster binaries are not built.
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { manifests, pod } from '../helpers/real-cluster-objects.js';
import { startClusterLogged, startProxies, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';

const skip = skipUnlessRealCluster();

const TRANSPORTS = ['spdy', 'websocket'] as const;
type Transport = (typeof TRANSPORTS)[number];
/** Longer than the relay's 2 s tear-down grace and the v4 stream's 1 s linger. */
const DIAL_DELAY_MS = 3_000;

const SLOW_ECHO = pod({
  name: 'slow-echo',
  annotations: { 'proxyout.test/dial-delay': `${DIAL_DELAY_MS}ms` },
  containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ containerPort: 7000 }] }],
});

let cluster: RealCluster | undefined;
let proxies = new Map<Transport, ProxyProcess>();
let podIP = '';

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  await cluster.kubectl(['apply', '-f', '-'], { input: manifests(SLOW_ECHO) });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/slow-echo', '--timeout=60s']);
  podIP = (await cluster.get<{ status: { podIP: string } }>('/api/v1/namespaces/shop/pods/slow-echo')).status.podIP;
  proxies = await startProxies(cluster, TRANSPORTS);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

/** Sends `request` and FIN at once; everything the pod sends until the stream ends. */
async function halfCloseExchange(socks: string, request: string): Promise<{ answer: string; ms: number }> {
  const t0 = Date.now();
  const { reply, socket, rest } = await socks5Connect(socks, podIP, 7000);
  assert.equal(reply, 0, 'SOCKS reply');
  const chunks: Buffer[] = [rest];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const ended = new Promise<void>((resolve, reject) => {
    socket.once('end', resolve);
    socket.once('error', reject);
  });
  socket.resume(); // socks5Connect hands it over paused
  socket.end(request);
  await ended;
  socket.destroy();
  return { answer: Buffer.concat(chunks).toString(), ms: Date.now() - t0 };
}

for (const transport of TRANSPORTS) {
  test(`${transport}: a half-closing client gets the answer of a pod the runtime dials slowly`, { timeout: 30_000 }, async (t: TestContext) => {
    if (skip) return t.skip(skip);
    const { answer, ms } = await halfCloseExchange(proxies.get(transport)!.socks!, 'hello\n');
    t.diagnostic(`answer after ${ms} ms`);
    assert.equal(answer, 'hello\n', 'the request echoed after the dial delay, not a clean empty end');
    assert.ok(ms >= DIAL_DELAY_MS, `the answer came after the dial (${ms} ms)`);
  });
}
