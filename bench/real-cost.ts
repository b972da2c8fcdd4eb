// `npm run bench:real`: forwarding cost through a real control plane (test/real-cluster: upstream
// kube-apiserver and the CRI streaming server behind a node stand-in, docs/real-cluster.md), the
// proxy against real kubectl port-forward on the same pods, rounds interleaved:
// - echo: BENCH_BULK_MB (default 128) MiB each way through one connection, MiB/s and the
//   forwarder's CPU per GiB;
// - download: a pod that sends BENCH_BULK_MB MiB on connect, MiB/s and CPU per GiB;
// - first byte: BENCH_LATENCY_ROUNDS (default 1000) connections (connect, one byte each way,
//   close), p50 and p99.
// Targets (as for the simulator): CPU per GiB ≤ 0.8× kubectl's, download ≥ 1.1× kubectl's, first
// byte p99 ≤ kubectl's. On loopback only: the links of 20 and 80 ms round trip are not built here.
// Needs the test bed built (bash test/real-cluster/build.sh).
import { isBuilt, startRealCluster } from '../test/helpers/real-cluster.js';
import { startBenchProxy } from './npm-layout.js';
import { bulkEcho, cpuSecondsOf, interleavedFirstByteRounds, judge, median, reasonOf } from './measure.js';
import { socksOpener, startKubectlPortForward, tcpOpener, type Opener } from './multiplex.js';
import type { Duplex } from 'node:stream';
import { socks5Connect } from '../test/helpers/socks-client.js';

const BULK_BYTES = Number(process.env.BENCH_BULK_MB ?? 128) << 20;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LATENCY_ROUNDS = Number(process.env.BENCH_LATENCY_ROUNDS ?? 1000);

const MANIFESTS = `
apiVersion: v1
kind: Pod
metadata: {name: echo-0, namespace: shop, labels: {app: echo}}
spec:
  containers: [{name: echo, image: proxyout/echo, ports: [{containerPort: 7000}]}]
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: shop}
spec: {selector: {app: echo}, ports: [{port: 7000, targetPort: 7000}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bulk-0, namespace: shop, labels: {app: bulk}}
spec:
  containers: [{name: bulk, image: proxyout/bulk, env: [{name: BULK_BYTES, value: "${BULK_BYTES}"}], ports: [{containerPort: 9000}]}]
---
apiVersion: v1
kind: Service
metadata: {name: bulk, namespace: shop}
spec: {selector: {app: bulk}, ports: [{port: 9000, targetPort: 9000}]}
`;

/** A SOCKS5 stream whose pod talks first: the bytes that came with the reply stay readable. */
function socksDownloadOpener(proxy: string, host: string, port: number): Opener {
  return async () => {
    const { reply, socket, rest } = await socks5Connect(proxy, host, port);
    if (reply !== 0) throw new Error(`SOCKS reply ${reply}`);
    socket.removeAllListeners('data');
    if (rest.length) socket.unshift(rest);
    return socket;
  };
}

/** Reads what the pod sends on connect to its end: MiB/s; throws naming the path when it comes short. */
async function download(open: Opener, path: string): Promise<number> {
  const stream: Duplex = await open();
  const started = performance.now();
  let got = 0;
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (c: Buffer) => (got += c.length));
    stream.on('end', resolve);
    stream.on('error', reject);
    stream.resume();
  }).catch((err: unknown) => {
    throw new Error(`${path}: download failed after ${got} bytes: ${reasonOf(err)}`);
  });
  stream.destroy();
  if (got !== BULK_BYTES) throw new Error(`${path}: download ended after ${got} of ${BULK_BYTES} bytes`);
  return got / 2 ** 20 / ((performance.now() - started) / 1000);
}

function ratioLine(what: string, ours: number[], theirs: number[], target: string, ok: (r: number) => boolean): string {
  const ofMedians = median(ours) / median(theirs);
  const paired = median(ours.map((o, i) => o / theirs[i]!));
  const verdict = !Number.isFinite(ofMedians) || !Number.isFinite(paired) ? judge(false, [ofMedians, paired]) : ok(ofMedians) && ok(paired) ? 'met' : ok(ofMedians) || ok(paired) ? 'met by one estimator only' : 'NOT met';
  return `${what}: ${ofMedians.toFixed(2)} × kubectl, paired rounds ${paired.toFixed(2)} × (target ${target}: ${verdict})`;
}

if (!isBuilt()) {
  console.log('Forwarding cost through a real control plane: left out, the test bed is not built (bash test/real-cluster/build.sh)');
  process.exit(0);
}
const cluster = await startRealCluster({ progress: () => undefined });
const stops: Array<() => unknown> = [];
try {
  await cluster.kubectl(['apply', '-f', '-'], { input: MANIFESTS });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/echo-0', 'pod/bulk-0', '--timeout=60s']);
  const proxy = await startBenchProxy(['--kubeconfig', cluster.kubeconfig, '--namespace', 'shop', '--listen-socks', '127.0.0.1:0', '--log-level', 'warn', '--transport', 'spdy']);
  stops.push(() => proxy.stop());
  const kEcho = await startKubectlPortForward(cluster.kubeconfig, 'shop', 'echo-0', 7000);
  const kBulk = await startKubectlPortForward(cluster.kubeconfig, 'shop', 'bulk-0', 9000);
  if (!kEcho || !kBulk) throw new Error('kubectl port-forward did not start');
  stops.push(() => kEcho.stop(), () => kBulk.stop());
  const paths = [
    { name: 'proxy', echo: socksOpener(proxy.socks!, 'echo.shop', 7000), bulk: socksDownloadOpener(proxy.socks!, 'bulk.shop', 9000), pid: proxy.proc.pid!, downloadPid: proxy.proc.pid! },
    { name: 'kubectl port-forward', echo: tcpOpener('127.0.0.1', kEcho.port), bulk: tcpOpener('127.0.0.1', kBulk.port), pid: kEcho.pid, downloadPid: kBulk.pid },
  ];
  for (const p of paths) {
    await bulkEcho(p.echo, BULK_BYTES, `${p.name} (warm-up)`);
    await download(p.bulk, `${p.name} (warm-up)`);
  }
  const figures: Record<string, { echoMibs: number[]; echoCpu: number[]; downMibs: number[]; downCpu: number[] }> = {};
  for (let r = 0; r < ROUNDS; r++) {
    for (const p of paths) {
      const f = (figures[p.name] ??= { echoMibs: [], echoCpu: [], downMibs: [], downCpu: [] });
      let before = cpuSecondsOf(p.pid);
      f.echoMibs.push(await bulkEcho(p.echo, BULK_BYTES, `${p.name}, round ${r + 1}`));
      f.echoCpu.push((cpuSecondsOf(p.pid) - before) / ((2 * BULK_BYTES) / 2 ** 30));
      before = cpuSecondsOf(p.downloadPid);
      f.downMibs.push(await download(p.bulk, `${p.name}, round ${r + 1}`));
      f.downCpu.push((cpuSecondsOf(p.downloadPid) - before) / (BULK_BYTES / 2 ** 30));
    }
  }
  const latency = await interleavedFirstByteRounds(paths.map((p) => ({ name: p.name, echo: p.echo })), LATENCY_ROUNDS);
  console.log(`\nForwarding cost through a real control plane (kube-apiserver v1.37.2, the CRI streaming server; loopback), median of ${ROUNDS} interleaved rounds`);
  console.log(`path                        echo MiB/s  cpu s/GiB   download MiB/s  cpu s/GiB   first byte p50 / p99 ms`);
  for (const p of paths) {
    const f = figures[p.name]!;
    console.log(`${p.name.padEnd(28)}${median(f.echoMibs).toFixed(1).padStart(10)}  ${median(f.echoCpu).toFixed(2).padStart(9)}   ${median(f.downMibs).toFixed(1).padStart(14)}  ${median(f.downCpu).toFixed(2).padStart(9)}   ${latency[p.name]!.p50.toFixed(2)} / ${latency[p.name]!.p99.toFixed(2)}`);
  }
  const [ours, theirs] = [figures.proxy!, figures['kubectl port-forward']!];
  console.log(ratioLine('echo CPU per GiB', ours.echoCpu, theirs.echoCpu, '≤ 0.8', (x) => x <= 0.8));
  console.log(ratioLine('download CPU per GiB', ours.downCpu, theirs.downCpu, '≤ 0.8', (x) => x <= 0.8));
  console.log(ratioLine('download throughput', ours.downMibs, theirs.downMibs, '≥ 1.1', (x) => x >= 1.1));
  const [lo, lk] = [latency.proxy!, latency['kubectl port-forward']!];
  console.log(`first byte p99 (client in this process): ${lo.p99.toFixed(2)} ms against ${lk.p99.toFixed(2)} ms (target ≤ kubectl's: ${lo.p99 <= lk.p99 ? 'met' : 'NOT met'})`);
} finally {
  for (const stop of stops.reverse()) await stop();
  await cluster.stop();
}
process.exit(0);
