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

const MANIFESTS = manifests(
  pod({ name: 'echo', containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ name: 'echo', containerPort: 7000 }] }] }),
  service('echo', { ports: [{ name: 'echo', port: 7000 }] }),
  statefulSet({ name: 'db', replicas: 1, serviceName: 'db', containers: [httpContainer('db')] }),
  service('db', { clusterIP: 'None', ports: [{ name: 'http', port: 8080 }] }),
);

let cluster: RealCluster | undefined;
let proxies = new Map<'spdy', ProxyProcess>();

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  await cluster.kubectl(['apply', '-f', '-'], { input: MANIFESTS });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/echo', '--timeout=60s']);
  // Again, to wait for the EndpointSlices to list the ready pods too.
  await applyAndRollOut(cluster, MANIFESTS, ['statefulset/db']);
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
