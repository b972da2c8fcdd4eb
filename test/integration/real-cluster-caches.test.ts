// The proxy's watch cache against changes a real control plane makes while clients hold streams
// and reach pods by IP (test/helpers/real-cluster.ts): real kubectl drives the change, the real
// CLI serves, and what a client reaches is judged by the pod that answers (proxyout/http names its
// pod and UID). Skips with a reason when the test bed is not built.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { httpContainer, manifests, pod, service, statefulSet } from '../helpers/real-cluster-objects.js';
import { applyAndRollOut, startClusterLogged, startProxies, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { Reader, socks5Connect } from '../helpers/socks-client.js';
import { curl } from '../helpers/curl.js';
import { eventually } from '../helpers/cluster.js';

const skip = skipUnlessRealCluster();

/** The peers' headless Service, publishing every pod whatever its state. */
function peerService(): object {
  const svc = service('peer', { clusterIP: 'None', ports: [{ name: 'http', port: 8080 }] }) as { spec: Record<string, unknown> };
  svc.spec.publishNotReadyAddresses = true;
  return svc;
}

const MANIFESTS = manifests(
  pod({ name: 'echo', containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ name: 'echo', containerPort: 7000 }] }] }),
  service('echo', { ports: [{ name: 'echo', port: 7000 }] }),
  statefulSet({ name: 'db', replicas: 1, serviceName: 'db', containers: [httpContainer('db')] }),
  service('db', { clusterIP: 'None', ports: [{ name: 'http', port: 8080 }] }),
  // Peers that find each other by name whatever their state (a database's members): each keeps
  // serving 6 s after its deletion, as an app draining its clients.
  statefulSet({ name: 'peer', replicas: 1, serviceName: 'peer', annotations: { 'proxyout.test/stop-delay': '6s' }, containers: [httpContainer('peer')] }),
  peerService(),
);

let cluster: RealCluster | undefined;
let proxies = new Map<'spdy', ProxyProcess>();

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  await cluster.kubectl(['apply', '-f', '-'], { input: MANIFESTS });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/echo', '--timeout=60s']);
  // Again, to wait for the EndpointSlices to list the ready pods too.
  await applyAndRollOut(cluster, MANIFESTS, ['statefulset/db', 'statefulset/peer']);
  proxies = await startProxies(cluster, ['spdy'] as const);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

const socks = () => proxies.get('spdy')!.socks!;

/** A running pod's IP and UID, once it has them. */
async function podAddress(name: string): Promise<{ ip: string; uid: string }> {
  return eventually(async () => {
    const r = await cluster!.kubectl([
      '-n',
      'shop',
      'get',
      'pod',
      name,
      '-o',
      'jsonpath={.status.phase} {.status.podIP} {.metadata.uid} {.metadata.deletionTimestamp}',
    ]);
    const [phase, ip, uid, deleting] = r.stdout.trim().split(' ');
    return phase === 'Running' && ip && !deleting ? { ip, uid } : undefined;
  }, 30_000);
}

/** GET http://ip:8080/ through the SOCKS listener: the UID of the pod that answered, or the refusal. */
async function reached(ip: string): Promise<string> {
  const r = await curl(['-i', '-x', `socks5h://${socks()}`, `http://${ip}:8080/`], 5_000);
  return /^x-pod-uid: (\S+)/im.exec(r.stdout)?.[1] ?? `refused (${r.code}: ${r.stderr.trim()})`;
}

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

test("a StatefulSet pod's old IP does not reach its successor under the same name", { skip }, async () => {
  const first = await podAddress('db-0');
  assert.equal(await reached(first.ip), first.uid, 'the Pod IP reaches its pod (and the proxy keeps that answer)');
  await cluster!.kubectl(['-n', 'shop', 'delete', 'pod', 'db-0', '--wait=false']);
  const next = await eventually(async () => {
    const now = await podAddress('db-0');
    return now.uid !== first.uid && now;
  }, 30_000);
  assert.notEqual(next.ip, first.ip, 'the successor has another IP (the node hands out the next free one)');
  const since = Date.now();
  // Within 2 s of the successor running: its IP reaches it, the old IP reaches nobody.
  assert.equal(await eventually(async () => (await reached(next.ip)) === next.uid && 'ok', 2_000, 100), 'ok');
  const old = await reached(first.ip);
  console.log(`# old IP after the successor runs (+${Date.now() - since} ms): ${old}`);
  assert.notEqual(old, next.uid, `${first.ip} (the old instance's) must not reach the successor at ${next.ip}`);
  assert.match(old, /^refused/);
});

test('a terminating pod of a Service with publishNotReadyAddresses keeps its name while it serves, as CoreDNS answers it', { skip }, async () => {
  const { uid } = await podAddress('peer-0');
  const url = 'http://peer-0.peer.shop.svc.cluster.local:8080/';
  const viaName = async () => /^x-pod-uid: (\S+)/im.exec((await curl(['-i', '-x', `socks5h://${socks()}`, url], 5_000)).stdout)?.[1];
  assert.equal(await viaName(), uid);
  await cluster!.kubectl(['-n', 'shop', 'delete', 'pod', 'peer-0', '--wait=false']);
  // The controller writes it ready (publishNotReadyAddresses) and terminating; CoreDNS reads ready alone.
  type Slices = { items: Array<{ endpoints?: Array<{ hostname?: string; conditions?: { ready?: boolean; terminating?: boolean } }> }> };
  await eventually(
    async () => {
      const list = await cluster!.get<Slices>('/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dpeer');
      return list.items.some((sl) => sl.endpoints?.some((e) => e.hostname === 'peer-0' && e.conditions?.ready === true && e.conditions.terminating === true));
    },
    5_000,
    50,
  );
  assert.equal(await eventually(async () => (await viaName()) === uid && 'reached', 2_000, 100), 'reached', 'peer-0 answers while it drains');
});
