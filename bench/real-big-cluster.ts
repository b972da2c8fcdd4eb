// `npm run bench:real-big`: the big-cluster figures against the real control plane
// (test/real-cluster, docs/real-cluster.md): the proxy at 0 pods, then at each size of
// BENCH_REAL_BIG_PODS (default 5000,10000,20000) running pods that Deployments made behind
// Services (bench/real-big-load.ts), one cluster grown block by block. Per size:
//   - the real CLI (as npm installs it when the bundle is built): spawn to ready, RSS 3 s later
//     and again after BENCH_REAL_BIG_IDLE_S (default 30) idle without a client, which the per-pod
//     target is judged on (the empty cluster's proxy forwards nothing: neither do the others
//     before that reading); then one HTTP request through it, and its RSS 3 s later; the RSS
//     figures are medians of BENCH_REAL_BIG_REPEATS (default 3) proxies, and of as many started
//     with a daemon's allocator environment (src/managed/allocator-env.ts);
//     and the start-up API load: requests from the API server's audit log (the proxy alone runs as
//     the `cert` user, the only one audited) and bytes through a counting TCP relay in front of
//     the API server (both ways, TLS records included);
//   - in this process: a ClusterCache + Resolver against the same server (the `cert` user too):
//     decision p50/p99 for Service names and ClusterIPs, the API requests they cost (audit log),
//     and Pod IPs (looked up on first use: one field-selector LIST each) first ask / again.
// A size whose pods are not all ready in BENCH_REAL_BIG_WAIT_S (default 1200) ends the run, with
// the reason, as does the machine's available memory falling under BENCH_REAL_BIG_MEMORY_FLOOR_GIB
// (default 3). Environment also: BENCH_REAL_BIG_PODS_PER_NODE (default 250), BENCH_REAL_BIG_QPS
// (the controllers' and the scheduler's client QPS, default 200, the node stand-in's twice that;
// 0 keeps the defaults: 20, 50 and 100),
// BENCH_REAL_BIG_DECISIONS (default 20000). Before each measurement the control plane is let go
// quiet (under half a core over 5 s, 2 min at most); what it used is printed.
// Needs the test bed built (bash test/real-cluster/build.sh). Figures also go to
// bench/results/real-big-cluster.json (bench/results.ts), the sizes measured before a failure too.
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { isBuilt, startRealCluster, type RealCluster } from '../test/helpers/real-cluster.js';
import { benchProxyForm, startBenchProxy } from './npm-layout.js';
import { allocatorEnv } from '../src/managed/allocator-env.js';
import { createBlocks, createNamespaces, HTTP_APP, PODS_PER_BLOCK, SERVICES_PER_BLOCK, waitForPods } from './real-big-load.js';
import { AuditLog, CountingRelay } from './real-big-meter.js';
import { median } from './measure.js';
import { decisionFigures, type DecisionFigures } from './real-big-decisions.js';
import { socks5Connect } from '../test/helpers/socks-client.js';
import { writeResults } from './results.js';

const SIZES = (process.env.BENCH_REAL_BIG_PODS ?? '5000,10000,20000')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const PER_NODE = Number(process.env.BENCH_REAL_BIG_PODS_PER_NODE ?? 250);
const QPS = Number(process.env.BENCH_REAL_BIG_QPS ?? 200);
const WAIT_MS = Number(process.env.BENCH_REAL_BIG_WAIT_S ?? 1200) * 1000;
const SETTLE_MS = 3_000;
/** Then the proxy idles this long before the RSS a user holds all day is read (V8's memory reducer gives a sync's headroom back after ~15–20 s of quiet). */
const IDLE_S = Number(process.env.BENCH_REAL_BIG_IDLE_S ?? 30);
const MiB = 1024 * 1024;
/**
 * Proxies started per size and form, RSS figures their medians: one proxy's RSS moves by a few MiB
 * from run to run (how much its V8 worker threads' malloc arenas kept).
 */
const REPEATS = Math.max(1, Number(process.env.BENCH_REAL_BIG_REPEATS ?? 3));
/** As `kubectl proxyout` runs in the foreground, and as `connect` starts a daemon (its allocator environment). */
const FORMS = { foreground: {}, daemon: allocatorEnv(process.env) } as const;
type Form = keyof typeof FORMS;

const log = (line: string) => process.stderr.write(`[bench:real-big] ${line}\n`);
const rssOf = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) * 1024;

/** RSS of the cluster's processes (they run with the cluster's directory as their cwd), by name. */
function componentRss(dir: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readlinkSync(`/proc/${pid}/cwd`) !== dir) continue;
      const name = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      out[name] = (out[name] ?? 0) + rssOf(Number(pid));
    } catch {
      continue; // gone meanwhile, or not ours
    }
  }
  return out;
}

/** CPU seconds the cluster's processes have used so far. */
function componentCpu(dir: string): number {
  let ticks = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readlinkSync(`/proc/${pid}/cwd`) !== dir) continue;
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += Number(fields[11]) + Number(fields[12]); // utime, stime
    } catch {
      continue;
    }
  }
  return ticks / 100;
}

/**
 * Waits (up to 2 min) until the control plane uses under half a core over 5 s: the controllers
 * finish their status updates well after the last pod is ready. Returns the last 5 s's cores.
 */
async function quiet(dir: string): Promise<number> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const before = componentCpu(dir);
    await delay(5_000);
    const cores = (componentCpu(dir) - before) / 5;
    if (cores < 0.5 || Date.now() > deadline) return cores;
  }
}

interface Row {
  pods: number;
  services: number;
  slices: number;
  fillS?: number;
  readyMs: number;
  rssMiB: number;
  /** After IDLE_S more seconds without clients: the RSS a user holds all day. Medians of REPEATS proxies. */
  idleRssMiB: number;
  /** The same, started with a daemon's allocator environment (managed/allocator-env.ts). */
  daemonRssMiB: number;
  daemonIdleRssMiB: number;
  runs: Record<Form, Array<{ synced: number; idle: number }>>;
  /** 3 s after one request through the proxy, made after the idle reading (none at 0 pods). */
  afterRequestMiB: number;
  requests: string;
  bytesIn: number;
  bytesOut: number;
  forwarded: string;
  /** Control-plane cores busy over the 5 s before the proxy started, and during its start-up. */
  busyBefore: number;
  busyDuring: number;
  decisions: DecisionFigures;
  components: Record<string, number>;
}

/** One GET through the proxy to the HTTP app's Service: the proxy still forwards at this size. */
async function forwardCheck(socks: string): Promise<string> {
  const { reply, socket, rest } = await socks5Connect(socks, `${HTTP_APP.name}.${HTTP_APP.namespace}`, 80);
  if (reply !== 0) return `SOCKS reply 0x0${reply.toString(16)}`;
  socket.removeAllListeners('data');
  let got = rest.toString();
  socket.on('data', (d: Buffer) => (got += d.toString()));
  socket.resume(); // socks5Connect hands it over paused
  socket.write(`GET / HTTP/1.1\r\nHost: ${HTTP_APP.name}\r\nConnection: close\r\n\r\n`);
  await Promise.race([new Promise((r) => socket.once('end', r)), new Promise((r) => socket.once('close', r)), delay(10_000)]);
  socket.destroy();
  return /^HTTP\/1\.1 200/.test(got) && got.includes(`namespace=${HTTP_APP.namespace}`) ? 'answered' : `unexpected answer: ${JSON.stringify(got.slice(0, 80))}`;
}

/** RSS 3 s after ready, and after IDLE_S more seconds without a client (the middle of 3 readings), MiB. */
async function rssRun(pid: number): Promise<{ synced: number; idle: number }> {
  await delay(SETTLE_MS);
  const synced = rssOf(pid) / MiB;
  await delay(IDLE_S * 1000);
  const readings: number[] = [];
  for (let i = 0; i < 3; i++) {
    if (i > 0) await delay(1_000);
    readings.push(rssOf(pid) / MiB);
  }
  return { synced, idle: readings.sort((a, b) => a - b)[1]! };
}

async function measure(
  cluster: RealCluster,
  relay: CountingRelay,
  audit: AuditLog,
  proxyKubeconfig: string,
  directKubeconfig: string,
  pods: number,
  fillS?: number,
): Promise<Row> {
  const objects = (await cluster.get<{ items: unknown[] }>('/api/v1/services')).items.length;
  const slices = (await cluster.get<{ items: unknown[] }>('/apis/discovery.k8s.io/v1/endpointslices')).items.length;
  const busyBefore = await quiet(cluster.dir);
  relay.reset();
  const cpuBefore = componentCpu(cluster.dir);
  const since = Date.now();
  const started = performance.now();
  const proxy = await startBenchProxy(['--kubeconfig', proxyKubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'info'], { timeoutMs: 300_000 });
  const readyMs = performance.now() - started;
  const [bytesIn, bytesOut] = [relay.toClient, relay.toServer];
  const until = Date.now();
  const busyDuring = (componentCpu(cluster.dir) - cpuBefore) / (readyMs / 1000);
  const runs: Record<Form, Array<{ synced: number; idle: number }>> = { foreground: [await rssRun(proxy.proc.pid!)], daemon: [] };
  // Only after the idle reading: the empty cluster has no pod to forward to, and a request's
  // tunnel and compiled code are a cost per proxy, not per pod.
  const forwarded = pods > 0 ? await forwardCheck(proxy.socks!).catch((err: unknown) => `failed: ${String(err)}`) : '—';
  await delay(SETTLE_MS);
  const afterRequestMiB = pods > 0 ? rssOf(proxy.proc.pid!) / MiB : NaN;
  await proxy.stop();
  const requests = (await audit.between(since, until)).summary();
  for (let r = 0; r < REPEATS; r++) {
    for (const form of Object.keys(FORMS) as Form[]) {
      if (form === 'foreground' && r === 0) continue;
      const again = await startBenchProxy(['--kubeconfig', proxyKubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'info'], {
        timeoutMs: 300_000,
        env: FORMS[form],
      });
      runs[form].push(await rssRun(again.proc.pid!));
      await again.stop();
    }
  }
  const [rssMiB, idleRssMiB] = [median(runs.foreground.map((x) => x.synced)), median(runs.foreground.map((x) => x.idle))];
  const [daemonRssMiB, daemonIdleRssMiB] = [median(runs.daemon.map((x) => x.synced)), median(runs.daemon.map((x) => x.idle))];
  const decisions = await decisionFigures(cluster, directKubeconfig, audit);
  // Each size as it comes: a later size that fails leaves these.
  log(
    `${pods} pods: control plane ${busyBefore.toFixed(2)} cores busy before, ${busyDuring.toFixed(2)} during; ready in ${Math.round(readyMs)} ms, RSS ${rssMiB.toFixed(1)} MiB (${idleRssMiB.toFixed(1)} after ${IDLE_S} s idle, ${afterRequestMiB.toFixed(1)} after a request; as a daemon ${daemonRssMiB.toFixed(1)} / ${daemonIdleRssMiB.toFixed(1)}), ${requests}, ${bytesIn} bytes in, forwarded: ${forwarded}, decision p99 ${decisions.p99us.toFixed(1)} µs`,
  );
  return {
    pods,
    services: objects,
    slices,
    fillS,
    readyMs,
    rssMiB,
    idleRssMiB,
    daemonRssMiB,
    daemonIdleRssMiB,
    runs,
    afterRequestMiB,
    requests,
    bytesIn,
    bytesOut,
    forwarded,
    busyBefore,
    busyDuring,
    decisions,
    components: componentRss(cluster.dir),
  };
}

if (!isBuilt()) {
  console.log('Big clusters against the real control plane: left out, the test bed is not built (bash test/real-cluster/build.sh)');
  process.exit(0);
}
const maxPods = Math.max(0, ...SIZES);
// Pods spread unevenly over nodes: a tenth more room than the largest size needs.
const nodeCount = Math.max(1, Math.ceil((maxPods * 1.1) / PER_NODE));
const work = await mkdtemp(path.join(os.tmpdir(), 'proxyout-real-big-'));
const policy = path.join(work, 'audit-policy.yaml');
await writeFile(
  policy,
  'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  users: [proxyout-cert-user]\n- level: None\n',
);
const auditFile = path.join(work, 'audit.log');
// 0: the upstream defaults (and the node stand-in's own).
const qpsFlags = QPS > 0 ? [`--kube-api-qps=${QPS}`, `--kube-api-burst=${QPS * 2}`] : [];
const clusterStarted = performance.now();
const cluster = await startRealCluster({
  nodes: Array.from({ length: nodeCount }, (_, i) => `node-${i + 1}`),
  apiServerFlags: [`--audit-policy-file=${policy}`, `--audit-log-path=${auditFile}`],
  nodeFlags: [`--max-pods=${PER_NODE}`, ...(QPS > 0 ? [`--kube-api-qps=${QPS * 2}`, `--kube-api-burst=${QPS * 4}`] : [])],
  controllerManagerFlags: qpsFlags,
  schedulerFlags: qpsFlags,
  progress: log,
});
log(`cluster of ${nodeCount} nodes (${PER_NODE} pods each at most) ready in ${Math.round(performance.now() - clusterStarted)} ms; ${cluster.dir}`);
const rows: Row[] = [];
const failures: string[] = [];
let relay: CountingRelay | undefined;
try {
  const audit = new AuditLog(auditFile);
  relay = await CountingRelay.start(new URL(cluster.server));
  const kc = readFileSync(cluster.kubeconfig, 'utf8').replace(/current-context: \S+/, 'current-context: cert');
  const directKubeconfig = path.join(work, 'direct.kubeconfig');
  const proxyKubeconfig = path.join(work, 'proxy.kubeconfig');
  await writeFile(directKubeconfig, kc, { mode: 0o600 });
  await writeFile(proxyKubeconfig, kc.replace(cluster.server, relay.url), { mode: 0o600 });
  await createNamespaces(cluster);
  rows.push(await measure(cluster, relay, audit, proxyKubeconfig, directKubeconfig, 0));
  let blocks = 0;
  for (const size of SIZES) {
    const target = Math.ceil(size / PODS_PER_BLOCK);
    const fillStarted = performance.now();
    try {
      log(`creating blocks ${blocks}..${target - 1}: ${(target - blocks) * PODS_PER_BLOCK} pods, ${(target - blocks) * SERVICES_PER_BLOCK} Services`);
      await createBlocks(cluster, blocks, target);
      blocks = target;
      await waitForPods(cluster, target * PODS_PER_BLOCK, WAIT_MS, log);
    } catch (err) {
      failures.push(`${size} pods: ${err instanceof Error ? err.message : String(err)}`);
      log(`stopping: ${failures.at(-1)}`);
      break;
    }
    const fillS = (performance.now() - fillStarted) / 1000;
    log(`${target * PODS_PER_BLOCK} pods ready after ${Math.round(fillS)} s; measuring`);
    rows.push(await measure(cluster, relay, audit, proxyKubeconfig, directKubeconfig, target * PODS_PER_BLOCK, fillS));
  }
} catch (err) {
  failures.push(`run failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
} finally {
  await relay?.close();
  await cluster.stop();
  await rm(work, { recursive: true, force: true });
}

const f = (n: number, d = 0) => (Number.isFinite(n) ? n.toFixed(d) : '—');
const mb = (n: number) => (n < 1e6 ? `${(n / 1e3).toFixed(1)} kB` : `${(n / 1e6).toFixed(1)} MB`);
console.log(
  `\n## Big clusters against the real control plane (kube-apiserver v1.37.2, ${nodeCount} stand-in nodes; node ${process.version}, ${os.cpus().length} CPUs)\n`,
);
console.log(`The proxy: ${benchProxyForm()}. Per 1,000 pods ${SERVICES_PER_BLOCK} Deployments behind as many Services.\n`);
console.log(
  `| running pods | Services / EndpointSlices | pods ready after | time to ready | proxy RSS synced / after ${IDLE_S} s idle / after a request | as a daemon: synced / idle | start-up API requests | start-up bytes from / to the API server | decision p50 / p99 | API requests in those | Pod IP: first ask p50 / again p99 | forwarded |`,
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) {
  const d = r.decisions;
  console.log(
    `| ${r.pods} | ${r.services} / ${r.slices} | ${r.fillS === undefined ? '—' : `${f(r.fillS)} s`} | ${f(r.readyMs / 1000, 2)} s | ${f(r.rssMiB)} / ${f(r.idleRssMiB)} / ${f(r.afterRequestMiB)} MiB | ${f(r.daemonRssMiB)} / ${f(r.daemonIdleRssMiB)} MiB | ${r.requests} | ${mb(r.bytesIn)} / ${mb(r.bytesOut)} | ${f(d.p50us, 1)} / ${f(d.p99us, 1)} µs | ${d.apiRequests} | ${d.podIpCount ? `${f(d.podIpColdP50ms, 2)} ms / ${f(d.podIpWarmP99us, 1)} µs` : '—'} | ${r.forwarded} |`,
  );
}
console.log('');
for (const r of rows) {
  const outcomes = Object.entries(r.decisions.outcomes)
    .map(([what, n]) => `${what} ${n}`)
    .join(', ');
  const comps = Object.entries(r.components)
    .sort()
    .map(([name, rss]) => `${name} ${f(rss / MiB)}`)
    .join(', ');
  console.log(
    `At ${r.pods} pods: control plane ${f(r.busyBefore, 2)} cores busy in the 5 s before the proxy started, ${f(r.busyDuring, 2)} during its start-up; the cache's heap in this process ${f(r.decisions.cacheHeapMiB, 1)} MiB; decisions ${outcomes || 'none'}; Pod IP look-ups ${r.decisions.podIpLookups} for ${r.decisions.podIpCount} IPs asked 3×; cluster RSS MiB: ${comps}.`,
  );
}
const base = rows.find((r) => r.pods === 0);
for (const r of rows.filter((x) => x.pods > 0)) {
  if (!base) break;
  const perPod = (mib: number, baseMib: number) => f(((mib - baseMib) * MiB) / r.pods);
  console.log(
    `Above the empty cluster at ${r.pods} pods: RSS after ${IDLE_S} s idle ${perPod(r.idleRssMiB, base.idleRssMiB)} bytes per pod (target ≤ 1024; 3 s after ready ${perPod(r.rssMiB, base.rssMiB)}), as a daemon ${perPod(r.daemonIdleRssMiB, base.daemonIdleRssMiB)} (${perPod(r.daemonRssMiB, base.daemonRssMiB)}), the cache's heap ${perPod(r.decisions.cacheHeapMiB, base.decisions.cacheHeapMiB)}.`,
  );
}
for (const failure of failures) console.log(`FAILED: ${failure}`);
writeResults('real-big-cluster', {
  apiServer: 'kube-apiserver v1.37.2',
  proxy: benchProxyForm(),
  nodes: nodeCount,
  podsPerNode: PER_NODE,
  servicesPer1000Pods: SERVICES_PER_BLOCK,
  rows: rows.map((r) => ({
    ...r,
    rssPerPodAboveEmpty: base && r.pods > 0 ? ((r.rssMiB - base.rssMiB) * MiB) / r.pods : undefined,
    idleRssPerPodAboveEmpty: base && r.pods > 0 ? ((r.idleRssMiB - base.idleRssMiB) * MiB) / r.pods : undefined,
    daemonIdleRssPerPodAboveEmpty: base && r.pods > 0 ? ((r.daemonIdleRssMiB - base.daemonIdleRssMiB) * MiB) / r.pods : undefined,
  })),
  failures,
});
process.exit(failures.length ? 1 : 0);
