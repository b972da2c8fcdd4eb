// `npm run bench:big`: the proxy against big simulated clusters of realistic objects
// (test/sim/realistic.ts: pods of 5–10 KB JSON) with 10,000 Services and their EndpointSlices, at
// 0 / 5,000 / 50,000 running pods. Per size:
//   - the real CLI: time from spawn to ready, RSS once synced, requests and bytes the API server
//     served during start-up;
//   - in this process: a ClusterCache + Resolver on the same cluster, the routing decision
//     (Resolver.resolve of Service names and ClusterIPs) p50/p99 and API requests during it; Pod IPs
//     (looked up on first use): the first ask and later ones;
//   - the cache alone in this process, with and without the pod watch: sync time, bytes, heap
//     after GC (what not watching Pods would save; see docs/architecture.md).
// Environment: BENCH_BIG_PODS="0,5000,50000", BENCH_BIG_SERVICES=10000, BENCH_BIG_DECISIONS=20000.
// Run with: npm run bench:big   (node --expose-gc --max-old-space-size=8192 dist/bench/big-cluster.js)
import { npmLayout, type NpmLayout } from './npm-layout.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { SimCluster } from '../test/sim/cluster.js';
import { loadBigCluster, type BigCluster } from '../test/sim/realistic.js';
import { startProxyProcess } from '../test/helpers/proxy-process.js';
import { loadKubeConfig } from '../src/cluster/kubeconfig.js';
import { ApiConnection } from '../src/cluster/api.js';
import { ClusterCache, ON_DEMAND_LIMITS } from '../src/cluster/cache.js';
import { POD_LOOKUP_LIMITS } from '../src/cluster/pod-lookup.js';
import { Resolver } from '../src/routes/cluster/resolver.js';
import { createLogger } from '../src/core/log.js';
import { ProxyError } from '../src/core/errors.js';
import type { Destination } from '../src/core/types.js';

const SIZES = (process.env.BENCH_BIG_PODS ?? '0,5000,50000').split(',').map(Number);
const SERVICES = Number(process.env.BENCH_BIG_SERVICES ?? 10_000);
const DECISIONS = Number(process.env.BENCH_BIG_DECISIONS ?? 20_000);
const SETTLE_MS = 3_000;

const MiB = 1024 * 1024;
const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

interface Row {
  pods: number;
  podJson: number;
  readyMs: number;
  rssMiB: number;
  /** The same for the clone (node + dist/src), when the npm form was measured above. */
  cloneRssMiB?: number;
  cloneReadyMs?: number;
  requests: string;
  bytes: number;
  decisionP50us: number;
  decisionP99us: number;
  decisionApiRequests: number;
  /** How the decisions ended: "answered", or the error's name and reply for a refusal. */
  decisionOutcomes: Record<string, number>;
  /** Pod IPs not behind the index: first ask (one look-up each) and again (from memory). */
  podIpColdP50ms: number;
  podIpWarmP99us: number;
  podIpLookups: number;
  cacheOnly: Record<'withPods' | 'withoutPods', { syncMs: number; bytes: number; heapMiB: number }>;
}

/** The real CLI: spawn → ready, RSS once synced, and what the API server served meanwhile. */
async function proxyFigures(sim: SimCluster, kubeconfig: string, installed?: NpmLayout): Promise<Pick<Row, 'readyMs' | 'rssMiB' | 'requests' | 'bytes'>> {
  sim.resetCounters();
  const started = performance.now();
  const proxy = await startProxyProcess(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'info'], {
    timeoutMs: 180_000,
    command: installed?.command,
    env: installed?.env,
  });
  const readyMs = performance.now() - started;
  const c = sim.counters;
  await sleep(SETTLE_MS);
  const rssMiB = rssOf(proxy.proc.pid!) / MiB;
  await proxy.stop();
  const requests = `${c.total} (${c.list} list, ${c.continued} continued, ${c.watch} watch of which ${c.watchList} watch-list)`;
  return { readyMs, rssMiB, requests, bytes: c.bytes };
}

/** Service names and ClusterIPs: answered from the cache, never an API request. */
function destinations(big: BigCluster): Destination[] {
  const out: Destination[] = [];
  for (let i = 0; i < 3000 && big.services.length; i++) {
    const s = big.services[(i * 7919) % big.services.length]!;
    out.push({ host: `${s.name}.${s.namespace}`, port: 80, type: 'domain' });
    out.push({ host: s.clusterIP, port: 80, type: 'ipv4' });
  }
  return out;
}

async function cacheIn(kubeconfig: string, watchPods: boolean): Promise<{ cache: ClusterCache; syncMs: number }> {
  const { kc } = loadKubeConfig({ kubeconfig });
  // A look-up budget the bench does not exhaust (it asks 200 Pod IPs at once).
  const podLookup = { ...POD_LOOKUP_LIMITS, lookupsPerSecond: 1e6, lookupBurst: 1e6, foundTtlMs: 600_000 };
  const cache = new ClusterCache(new ApiConnection(kc), createLogger('silent'), 'team-0', ON_DEMAND_LIMITS, { watchPods, podLookup });
  const started = performance.now();
  await cache.start();
  return { cache, syncMs: performance.now() - started };
}

function heapMiB(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().heapUsed / MiB;
}

/** Routing decisions on a synced cache in this process: no API request, time per decision. */
async function decisionFigures(
  sim: SimCluster,
  kubeconfig: string,
  big: BigCluster,
): Promise<Pick<Row, 'decisionP50us' | 'decisionP99us' | 'decisionApiRequests' | 'decisionOutcomes' | 'podIpColdP50ms' | 'podIpWarmP99us' | 'podIpLookups'>> {
  const { cache } = await cacheIn(kubeconfig, false);
  const resolver = new Resolver(cache, 'cluster.local');
  const dests = destinations(big);
  const times: number[] = [];
  const outcomes: Record<string, number> = {};
  const count = (what: string) => (outcomes[what] = (outcomes[what] ?? 0) + 1);
  sim.resetCounters();
  for (let i = 0; i < DECISIONS && dests.length; i++) {
    const d = dests[i % dests.length]!;
    const t = performance.now();
    // A refusal (no ready endpoint at 0 pods) is a decision too; every outcome is counted and printed.
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
  const c = sim.counters;
  // Pod IPs: the first ask looks the pod up (one API request), later ones are answered from memory.
  const podIps = big.podIPs.filter((_, i) => i % Math.max(1, Math.floor(big.podIPs.length / 200)) === 0).slice(0, 200);
  const cold: number[] = [];
  const warm: number[] = [];
  sim.resetCounters();
  for (const [list, ips] of [
    [cold, podIps],
    [warm, podIps],
    [warm, podIps],
  ] as const) {
    for (const ip of ips) {
      const t = performance.now();
      await resolver.resolve({ host: ip, port: 8080, type: 'ipv4' });
      list.push((performance.now() - t) * 1000);
    }
  }
  const lookups = sim.counters.total - sim.counters.watch;
  await cache.stop();
  times.sort((a, b) => a - b);
  cold.sort((a, b) => a - b);
  warm.sort((a, b) => a - b);
  return {
    decisionP50us: percentile(times, 50),
    decisionP99us: percentile(times, 99),
    decisionApiRequests: c.total - c.watch,
    decisionOutcomes: outcomes,
    podIpColdP50ms: percentile(cold, 50) / 1000,
    podIpWarmP99us: percentile(warm, 99),
    podIpLookups: lookups,
  };
}

async function syncOnce(kubeconfig: string, sim: SimCluster, watchPods: boolean): Promise<{ syncMs: number; bytes: number; held: number }> {
  sim.resetCounters();
  const { cache, syncMs } = await cacheIn(kubeconfig, watchPods);
  const bytes = sim.counters.bytes;
  cache.lookup.service('team-0', 'svc-0'); // builds the index
  const held = heapMiB();
  await cache.stop();
  return { syncMs, bytes, held };
}

/** The cache alone, with and without the pod watch: sync time, bytes served, heap it holds. */
async function cacheOnlyFigures(sim: SimCluster, kubeconfig: string): Promise<Row['cacheOnly']> {
  const out = {} as Row['cacheOnly'];
  for (const watchPods of [true, false]) {
    const { syncMs, bytes, held } = await syncOnce(kubeconfig, sim, watchPods);
    await sleep(100);
    out[watchPods ? 'withPods' : 'withoutPods'] = { syncMs, bytes, heapMiB: held - heapMiB() };
  }
  return out;
}

const installed = await npmLayout();
process.once('exit', () => installed?.dispose());
if (!installed) process.stderr.write('[bench:big] the bundle is not built (npm run package): measuring the clone only\n');
const rows: Row[] = [];
for (const pods of SIZES) {
  const sim = await SimCluster.start({ quiet: true });
  const loadStarted = performance.now();
  const big = loadBigCluster(sim, { pods, services: SERVICES });
  const loadMs = performance.now() - loadStarted;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-big-'));
  const kubeconfig = path.join(dir, 'kubeconfig');
  await sim.writeKubeconfig(kubeconfig, { namespace: 'team-0' });
  process.stderr.write(`[bench:big] ${pods} pods, ${SERVICES} services loaded in ${Math.round(loadMs)} ms (pod JSON ${big.jsonBytes.pod} B)\n`);
  // The figures of the npm install (the bundle: client-node's generated API models left out, see
  // scripts/package.mjs); the clone (node + dist/src) beside it for its RSS.
  const proxy = await proxyFigures(sim, kubeconfig, installed);
  const clone = installed ? await proxyFigures(sim, kubeconfig) : undefined;
  const decisions = await decisionFigures(sim, kubeconfig, big);
  const cacheOnly = await cacheOnlyFigures(sim, kubeconfig);
  rows.push({ pods, podJson: big.jsonBytes.pod, ...proxy, cloneRssMiB: clone?.rssMiB, cloneReadyMs: clone?.readyMs, ...decisions, cacheOnly });
  await sim.stop();
  await rm(dir, { recursive: true, force: true });
}

installed?.dispose();
const f = (n: number, d = 0) => n.toFixed(d);
console.log(`\n## Big clusters (${SERVICES} Services + EndpointSlices, realistic pods; node ${process.version}, ${os.cpus().length} CPUs)\n`);
console.log(
  installed
    ? 'The proxy as installed by npm (bin + bundle); in brackets the clone (node + dist/src).\n'
    : 'The clone (node + dist/src); the bundle is not built.\n',
);
console.log(
  '| running pods | pod JSON | time to ready | proxy RSS synced | start-up API requests | start-up API bytes | decision p50 / p99 (names, ClusterIPs) | API requests in those | Pod IP: first ask p50 / again p99 | look-ups for 200 Pod IPs asked 3× |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(
    `| ${r.pods} | ${(r.podJson / 1024).toFixed(1)} KB | ${f(r.readyMs / 1000, 2)} s${r.cloneReadyMs !== undefined ? ` (${f(r.cloneReadyMs / 1000, 2)} s)` : ''} | ${f(r.rssMiB)} MiB${r.cloneRssMiB !== undefined ? ` (${f(r.cloneRssMiB)} MiB)` : ''} | ${r.requests} | ${mb(r.bytes)} | ${f(r.decisionP50us, 1)} / ${f(r.decisionP99us, 1)} µs | ${r.decisionApiRequests} | ${r.podIpLookups ? `${f(r.podIpColdP50ms, 2)} ms / ${f(r.podIpWarmP99us, 1)} µs` : '—'} | ${r.podIpLookups} |`,
  );
}
for (const r of rows) {
  const outcomes = Object.entries(r.decisionOutcomes)
    .sort((a, b) => b[1] - a[1])
    .map(([what, n]) => `${what} ${n}`)
    .join(', ');
  console.log(`${r.pods === rows[0]!.pods ? '\n' : ''}Decisions at ${r.pods} pods: ${outcomes || 'none'}.`);
}
const base = rows.find((r) => r.pods === 0);
const top = rows[rows.length - 1];
if (base && top && top.pods > 0)
  console.log(`\nRSS above the idle baseline: ${f(((top.rssMiB - base.rssMiB) * MiB) / top.pods)} bytes per pod at ${top.pods} pods.`);
console.log('\n### The cache alone in one process: pods watched or not\n');
console.log('| running pods | with pods: sync / API bytes / heap | without pods: sync / API bytes / heap |');
console.log('|---|---|---|');
for (const r of rows) {
  const w = r.cacheOnly.withPods;
  const wo = r.cacheOnly.withoutPods;
  console.log(
    `| ${r.pods} | ${f(w.syncMs / 1000, 2)} s / ${mb(w.bytes)} / ${f(w.heapMiB, 1)} MiB | ${f(wo.syncMs / 1000, 2)} s / ${mb(wo.bytes)} / ${f(wo.heapMiB, 1)} MiB |`,
  );
}
