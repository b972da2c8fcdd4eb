// The routing decisions of `npm run bench:real-big`, in the bench process: a ClusterCache and a
// Resolver synced from the real API server (as bench/big-cluster.ts does against the simulator),
// the time per decision for Service names and ClusterIPs, and Pod IPs looked up on first use.
// API requests during them come from the audit log (the cache runs as the audited user).
import { performance } from 'node:perf_hooks';
import type { RealCluster } from '../test/helpers/real-cluster.js';
import { loadKubeConfig } from '../src/cluster/kubeconfig.js';
import { ApiConnection } from '../src/cluster/api.js';
import { ClusterCache, ON_DEMAND_LIMITS } from '../src/cluster/cache.js';
import { POD_LOOKUP_LIMITS } from '../src/cluster/pod-lookup.js';
import { Resolver } from '../src/routes/cluster/resolver.js';
import { createLogger } from '../src/core/log.js';
import { ProxyError } from '../src/core/errors.js';
import type { Destination } from '../src/core/types.js';
import type { AuditLog } from './real-big-meter.js';

const DECISIONS = Number(process.env.BENCH_REAL_BIG_DECISIONS ?? 20_000);
const POD_IPS = 200;

export interface DecisionFigures {
  p50us: number;
  p99us: number;
  apiRequests: number;
  outcomes: Record<string, number>;
  podIpCount: number;
  podIpColdP50ms: number;
  podIpWarmP99us: number;
  podIpLookups: number;
  /** Heap the synced cache holds in this process (after GC, with --expose-gc), MiB. */
  cacheHeapMiB: number;
}

function heapMiB(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;

type ServiceList = { items: Array<{ metadata: { name: string; namespace: string }; spec: { clusterIP?: string } }> };
type SliceList = { items: Array<{ endpoints?: Array<{ addresses: string[] }> | null }> };

export async function decisionFigures(cluster: RealCluster, kubeconfig: string, audit: AuditLog): Promise<DecisionFigures> {
  const { kc } = loadKubeConfig({ kubeconfig });
  // A look-up budget the bench does not exhaust (it asks 200 Pod IPs at once).
  const podLookup = { ...POD_LOOKUP_LIMITS, lookupsPerSecond: 1e6, lookupBurst: 1e6, foundTtlMs: 600_000 };
  const heapBefore = heapMiB();
  const cache = new ClusterCache(new ApiConnection(kc), createLogger('silent'), 'team-0', ON_DEMAND_LIMITS, { podLookup });
  await cache.start();
  cache.lookup.service('team-0', 'app-0-0'); // builds the index
  // Before the bench's own lists below: their objects must not count in either figure.
  const cacheHeapMiB = heapMiB() - heapBefore;
  try {
    const services = (await cluster.get<ServiceList>('/api/v1/services')).items;
    const dests: Destination[] = [];
    for (let i = 0; i < 3000 && services.length; i++) {
      const s = services[(i * 7919) % services.length]!;
      dests.push({ host: `${s.metadata.name}.${s.metadata.namespace}`, port: 80, type: 'domain' });
      if (s.spec.clusterIP && s.spec.clusterIP !== 'None') dests.push({ host: s.spec.clusterIP, port: 80, type: 'ipv4' });
    }
    const ips = (await cluster.get<SliceList>('/apis/discovery.k8s.io/v1/endpointslices')).items.flatMap((s) =>
      (s.endpoints ?? []).flatMap((e) => e.addresses),
    );
    const podIps = ips.filter((_, i) => i % Math.max(1, Math.floor(ips.length / POD_IPS)) === 0).slice(0, POD_IPS);
    const resolver = new Resolver(cache, 'cluster.local');
    const times: number[] = [];
    const outcomes: Record<string, number> = {};
    const count = (what: string) => (outcomes[what] = (outcomes[what] ?? 0) + 1);
    const t0 = Date.now();
    for (let i = 0; i < DECISIONS && dests.length; i++) {
      const d = dests[i % dests.length]!;
      const t = performance.now();
      // A refusal (no ready endpoint) is a decision too; every outcome is counted and printed.
      await resolver.resolve(d).then(
        () => count('answered'),
        (err: unknown) =>
          count(
            err instanceof ProxyError
              ? `${err.name} (SOCKS 0x0${err.socksReply.toString(16)})`
              : `unexpected ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`,
          ),
      );
      times.push((performance.now() - t) * 1000);
    }
    const t1 = Date.now();
    const cold: number[] = [];
    const warm: number[] = [];
    for (const list of [cold, warm, warm]) {
      for (const ip of podIps) {
        const t = performance.now();
        await resolver
          .resolve({ host: ip, port: 8080, type: 'ipv4' })
          .catch((err: unknown) => count(`Pod IP ${err instanceof Error ? err.name : String(err)}`));
        list.push((performance.now() - t) * 1000);
      }
    }
    const t2 = Date.now();
    times.sort((a, b) => a - b);
    cold.sort((a, b) => a - b);
    warm.sort((a, b) => a - b);
    return {
      p50us: percentile(times, 50),
      p99us: percentile(times, 99),
      apiRequests: (await audit.between(t0, t1)).events.filter((e) => e.verb !== 'watch').length,
      outcomes,
      podIpCount: podIps.length,
      podIpColdP50ms: percentile(cold, 50) / 1000,
      podIpWarmP99us: percentile(warm, 99),
      podIpLookups: (await audit.between(t1, t2)).events.filter((e) => e.verb !== 'watch').length,
      cacheHeapMiB,
    };
  } finally {
    await cache.stop();
  }
}
