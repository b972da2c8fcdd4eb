// The start-up the real-cluster test files share: a cluster with its progress on the test output,
// workloads applied and rolled out, the web pods' addresses, a proxy per transport against it, and
// the stop (proxies first; their logs kept beside the cluster's under PROXYOUT_KEEP_REAL_CLUSTER=1).
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { startRealCluster, type RealCluster, type StartOptions } from './real-cluster.js';
import { startProxyProcess, type ProxyProcess } from './proxy-process.js';

/** startRealCluster, saying what it does on the test output (`note` tells this cluster's flags apart). */
export async function startClusterLogged(opts: StartOptions = {}, note = ''): Promise<RealCluster> {
  const cluster = await startRealCluster({ ...opts, progress: (line) => console.log(`# ${line}`) });
  console.log(`# real cluster ${cluster.kubernetesVersion}${note} up in ${cluster.startupMs} ms`);
  return cluster;
}

/** Applies the YAML stream and waits for each workload (deployment/x, statefulset/y) in namespace shop to roll out. */
export async function applyAndRollOut(cluster: RealCluster, yaml: string, workloads: string[]): Promise<void> {
  const t0 = Date.now();
  await cluster.kubectl(['apply', '-f', '-'], { input: yaml });
  for (const w of workloads) await cluster.kubectl(['-n', 'shop', 'rollout', 'status', w, '--timeout=60s']);
  await endpointSlicesCaughtUp(cluster);
  console.log(`# workloads rolled out in ${Date.now() - t0} ms`);
}

/**
 * Waits until every Service with a selector lists exactly its ready pods as ready endpoints. A
 * rollout is complete when the pods are Ready; the EndpointSlice controller says so later (over a
 * second on a loaded machine), and a proxy started in between rightly finds no ready endpoint.
 */
export async function endpointSlicesCaughtUp(cluster: RealCluster, timeoutMs = 30_000): Promise<void> {
  type Meta = { name: string; namespace: string; deletionTimestamp?: string; labels?: Record<string, string> };
  type Pods = { items: Array<{ metadata: Meta; status: { conditions?: Array<{ type: string; status: string }> } }> };
  type Services = { items: Array<{ metadata: Meta; spec: { selector?: Record<string, string> } }> };
  type Slices = { items: Array<{ metadata: Meta; endpoints?: Array<{ conditions?: { ready?: boolean }; targetRef?: { name?: string } }> }> };
  const behind = async (): Promise<string[]> => {
    const [pods, services, slices] = await Promise.all([
      cluster.get<Pods>('/api/v1/pods'),
      cluster.get<Services>('/api/v1/services'),
      cluster.get<Slices>('/apis/discovery.k8s.io/v1/endpointslices'),
    ]);
    const out: string[] = [];
    for (const svc of services.items) {
      const selector = Object.entries(svc.spec.selector ?? {});
      if (selector.length === 0) continue;
      const { namespace, name } = svc.metadata;
      const want = pods.items
        .filter((p) => p.metadata.namespace === namespace && !p.metadata.deletionTimestamp)
        .filter((p) => selector.every(([k, v]) => p.metadata.labels?.[k] === v))
        .filter((p) => p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
        .map((p) => p.metadata.name)
        .sort();
      // A dual-stack Service has a slice per family, each listing the pod.
      const have = [
        ...new Set(
          slices.items
            .filter((s) => s.metadata.namespace === namespace && s.metadata.labels?.['kubernetes.io/service-name'] === name)
            .flatMap((s) => s.endpoints ?? [])
            .filter((e) => e.conditions?.ready === true)
            .map((e) => e.targetRef?.name ?? ''),
        ),
      ].sort();
      if (want.join() !== have.join()) out.push(`${namespace}/${name}: pods ready [${want.join(', ')}], slices ready [${have.join(', ')}]`);
    }
    return out;
  };
  const t0 = Date.now();
  let last: string[] = [];
  while (Date.now() - t0 < timeoutMs) {
    last = await behind();
    if (last.length === 0) return;
    await delay(50);
  }
  throw new Error(`EndpointSlices still behind the pods after ${timeoutMs} ms: ${last.join('; ')}`);
}

/** The web Service's ClusterIP, and a running (not terminating) web pod's name and IP, in shop. */
export async function webAddresses(cluster: RealCluster): Promise<{ clusterIP: string; podName: string; podIP: string }> {
  const clusterIP = (await cluster.kubectl(['-n', 'shop', 'get', 'svc', 'web', '-o', 'jsonpath={.spec.clusterIP}'])).stdout.trim();
  type PodList = { items: Array<{ metadata: { name: string; deletionTimestamp?: string }; status: { podIP?: string; phase?: string } }> };
  const pods = JSON.parse((await cluster.kubectl(['-n', 'shop', 'get', 'pods', '-l', 'app=web', '-o', 'json'])).stdout) as PodList;
  const running = pods.items.find((p) => p.status.phase === 'Running' && p.status.podIP && !p.metadata.deletionTimestamp)!;
  return { clusterIP, podName: running.metadata.name, podIP: running.status.podIP! };
}

/** A proxy per transport on the cluster's admin context, namespace shop, both listeners, debug logs. */
export async function startProxies<T extends string>(cluster: RealCluster, transports: readonly T[]): Promise<Map<T, ProxyProcess>> {
  const listen = ['--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0'];
  const args = ['--kubeconfig', cluster.kubeconfig, '--namespace', 'shop', ...listen, '--log-level', 'debug'];
  const started = await Promise.allSettled(transports.map((t) => startProxyProcess([...args, '--transport', t])));
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) {
    // The after hook never sees these: stop the ones that did start.
    await Promise.all(started.map((r) => r.status === 'fulfilled' && r.value.stop()));
    throw failed.reason;
  }
  return new Map(transports.map((t, i) => [t, (started[i] as PromiseFulfilledResult<ProxyProcess>).value]));
}

/** Stops the proxies, then the cluster; the proxies' exit codes, for the caller to check. */
export async function stopProxiesAndCluster(cluster: RealCluster | undefined, proxies: Map<string, ProxyProcess>): Promise<Array<number | null>> {
  const codes: Array<number | null> = [];
  for (const [transport, p] of proxies) {
    codes.push(await p.stop());
    // With PROXYOUT_KEEP_REAL_CLUSTER=1 the cluster's dir (component logs) stays; the proxies' logs join them.
    if (cluster && process.env.PROXYOUT_KEEP_REAL_CLUSTER === '1') await writeFile(path.join(cluster.dir, `proxy-${transport}.log`), p.stderr());
  }
  await cluster?.stop();
  return codes;
}

/** Polls until the Service's EndpointSlice (kube-controller-manager's) has a ready endpoint: the ms since `since`; undefined after 30 s. */
export async function endpointSliceReadyMs(cluster: RealCluster, service: string, since: number): Promise<number | undefined> {
  type Slices = { items: Array<{ endpoints?: Array<{ conditions?: { ready?: boolean } }> }> };
  const slices = `/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D${service}`;
  while (Date.now() - since < 30_000) {
    const list = await cluster.get<Slices>(slices).catch(() => undefined);
    if (list?.items.some((s) => s.endpoints?.some((e) => e.conditions?.ready))) return Date.now() - since;
    await delay(50);
  }
  return undefined;
}
