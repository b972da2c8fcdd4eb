// `npm run bench:real`: forwarding cost through a real control plane (test/real-cluster: upstream
// kube-apiserver and the CRI streaming server behind a node stand-in, docs/real-cluster.md), the
// proxy against real kubectl port-forward on the same pods, rounds interleaved:
// - echo: BENCH_BULK_MB (default 128) MiB each way through one connection, MiB/s and the
//   forwarder's CPU per GiB;
// - download: a pod that sends BENCH_BULK_MB MiB on connect, MiB/s (open to last byte) and CPU per GiB;
// - first byte: BENCH_LATENCY_ROUNDS (default 1000) connections (connect, one byte each way,
//   close), p50 and p99.
// Targets (as for the simulator): CPU per GiB ≤ 0.8× kubectl's, download ≥ 1.1× kubectl's, first
// byte p99 ≤ kubectl's — on loopback and with the API server behind a link of BENCH_REAL_LINKS
// (default 20,80) ms round trip (test/helpers/latency-link.ts), where the link's figures use
// BENCH_LINK_BULK_MB (default 64) MiB and BENCH_LINK_LATENCY_ROUNDS (default 200) connections.
// BENCH_B_ENV="NAME=VALUE …" adds a second proxy started with that environment as one more path,
// its ratios to kubectl's and to the first proxy's printed too (an A/B of two settings in one run);
// BENCH_B_NODE=/path/to/node runs that second proxy on another Node.js (with or without BENCH_B_ENV).
// Each round also downloads through an unparsed pipe (unparsed-pipe.ts: the same tunnel read the
// same way, its bytes written unparsed), to show what the proxy's own code costs on top.
// Needs the test bed built (bash test/real-cluster/build.sh). Figures also go to
// bench/results/real-cost.json (bench/results.ts).
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isBuilt, startRealCluster, type RealCluster } from '../test/helpers/real-cluster.js';
import { startLatencyLink } from '../test/helpers/latency-link.js';
import { bulkContainer, manifests, pod, service } from '../test/helpers/real-cluster-objects.js';
import { startBenchProxy } from './npm-layout.js';
import { bulkEcho, cpuSecondsOf, interleavedFirstByteRounds, median, ratioLine, reasonOf } from './measure.js';
import { socksOpener, startKubectlPortForward, tcpOpener, type Opener } from './multiplex.js';
import type { Duplex } from 'node:stream';
import { socks5Connect } from '../test/helpers/socks-client.js';
import { writeResults } from './results.js';
import { pipeDownload, startUnparsedPipe } from './unparsed-pipe.js';

const BULK_BYTES = Number(process.env.BENCH_BULK_MB ?? 128) << 20;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const LATENCY_ROUNDS = Number(process.env.BENCH_LATENCY_ROUNDS ?? 1000);
const LINKS = (process.env.BENCH_REAL_LINKS ?? '20,80').split(',').filter(Boolean).map(Number);
const LINK_BULK_BYTES = Number(process.env.BENCH_LINK_BULK_MB ?? 64) << 20;
const LINK_LATENCY_ROUNDS = Number(process.env.BENCH_LINK_LATENCY_ROUNDS ?? 200);

const MANIFESTS = manifests(
  pod({ name: 'echo-0', labels: { app: 'echo' }, containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ containerPort: 7000 }] }] }),
  service('echo', { ports: [{ port: 7000, targetPort: 7000 }] }),
  ...[
    { name: 'bulk', pod: 'bulk-0', bytes: BULK_BYTES },
    { name: 'bulk-link', pod: 'bulk-link', bytes: LINK_BULK_BYTES },
  ].flatMap((b) => [
    pod({ name: b.pod, labels: { app: b.name }, containers: [bulkContainer('bulk', b.bytes, 9000)] }),
    service(b.name, { ports: [{ port: 9000, targetPort: 9000 }] }),
  ]),
);

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

/**
 * Reads what the pod sends on connect to its end: MiB/s from the open to the last byte; throws
 * naming the path when it comes short or long. The clock stops at the last byte, not at the end:
 * the runtime keeps a stream whose pod closed ~1 s for the other direction (containerd's grace,
 * the node stand-in's too), so the end comes ~1 s later on every path, and timing it made every
 * download of 32 MiB look like ~28 MiB/s.
 */
async function download(open: Opener, path: string, bytes: number): Promise<number> {
  const started = performance.now();
  const stream: Duplex = await open();
  let got = 0;
  let lastByte = 0;
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (c: Buffer) => {
      got += c.length;
      if (got >= bytes && lastByte === 0) lastByte = performance.now();
    });
    stream.on('end', resolve);
    stream.on('error', reject);
    stream.resume();
  }).catch((err: unknown) => {
    throw new Error(`${path}: download failed after ${got} bytes: ${reasonOf(err)}`);
  });
  stream.destroy();
  if (got !== bytes) throw new Error(`${path}: download ended after ${got} of ${bytes} bytes`);
  return got / 2 ** 20 / ((lastByte - started) / 1000);
}

/** "NAME=VALUE NAME=VALUE" as an environment; an entry without "=" is a mistake worth stopping for. */
function parseEnvList(list: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const kv of list.split(' ').filter(Boolean)) {
    const at = kv.indexOf('=');
    if (at <= 0) throw new Error(`BENCH_B_ENV: "${kv}" is not NAME=VALUE`);
    env[kv.slice(0, at)] = kv.slice(at + 1);
  }
  return env;
}

/** The cluster's kubeconfig with its server behind a link of rttMs (0: the cluster's own). */
async function kubeconfigBehind(cluster: RealCluster, rttMs: number, stops: Array<() => unknown>): Promise<string> {
  if (rttMs === 0) return cluster.kubeconfig;
  const server = new URL(cluster.server);
  const link = await startLatencyLink({ host: server.hostname, port: Number(server.port) }, rttMs);
  stops.push(() => link.stop());
  const file = path.join(cluster.dir, `kubeconfig-${rttMs}ms`);
  const text = await readFile(cluster.kubeconfig, 'utf8');
  await writeFile(file, text.replace(cluster.server, `https://${link.host}:${link.port}`), { mode: 0o600 });
  return file;
}

/** Per-round figures of one path, and its first byte. */
interface PathFigures {
  echoMibs: number[];
  echoCpu: number[];
  downMibs: number[];
  downCpu: number[];
  firstByte?: { p50: number; p99: number };
}

/** The Node.js unparsed pipe's downloads, per round (unparsed-pipe.ts). */
interface PipeFigures {
  downMibs: number[];
  downCpu: number[];
}

/** One link's figures for bench/results/real-cost.json. */
interface LinkResult {
  rttMs: number;
  bulkMiB: number;
  rounds: number;
  latencyRounds: number;
  paths?: Record<string, PathFigures>;
  unparsedPipe?: PipeFigures;
  failed?: string;
}

/** One link's comparison: proxy and kubectl port-forward, rounds interleaved; prints the table and verdicts. */
async function compareOn(cluster: RealCluster, rttMs: number): Promise<LinkResult> {
  const stops: Array<() => unknown> = [];
  const bulkBytes = rttMs === 0 ? BULK_BYTES : LINK_BULK_BYTES;
  const [bulkService, bulkPod] = rttMs === 0 ? ['bulk', 'bulk-0'] : ['bulk-link', 'bulk-link'];
  const latencyRounds = rttMs === 0 ? LATENCY_ROUNDS : LINK_LATENCY_ROUNDS;
  const result: LinkResult = { rttMs, bulkMiB: bulkBytes >> 20, rounds: ROUNDS, latencyRounds };
  try {
    const kubeconfig = await kubeconfigBehind(cluster, rttMs, stops);
    // BENCH_PROXY_NODE_FLAGS="--cpu-prof --cpu-prof-dir=DIR" profiles the proxy (written at its exit).
    const nodeFlags = (process.env.BENCH_PROXY_NODE_FLAGS ?? '').split(' ').filter(Boolean);
    const proxy = await startBenchProxy(
      ['--kubeconfig', kubeconfig, '--namespace', 'shop', '--listen-socks', '127.0.0.1:0', '--log-level', 'warn', '--transport', 'spdy'],
      { nodeFlags },
    );
    stops.push(() => proxy.stop());
    const bEnv = process.env.BENCH_B_ENV ? parseEnvList(process.env.BENCH_B_ENV) : undefined;
    const bNode = process.env.BENCH_B_NODE || undefined;
    const proxyB =
      bEnv || bNode
        ? await startBenchProxy(
            ['--kubeconfig', kubeconfig, '--namespace', 'shop', '--listen-socks', '127.0.0.1:0', '--log-level', 'warn', '--transport', 'spdy'],
            { nodeFlags, env: bEnv, node: bNode },
          )
        : undefined;
    if (proxyB) stops.push(() => proxyB.stop());
    const kEcho = await startKubectlPortForward(kubeconfig, 'shop', 'echo-0', 7000);
    const kBulk = await startKubectlPortForward(kubeconfig, 'shop', bulkPod, 9000);
    if (!kEcho || !kBulk) throw new Error('kubectl port-forward did not start');
    const unparsedPipe = await startUnparsedPipe(kubeconfig, cluster.tokens.admin, 'shop', bulkPod, 9000);
    stops.push(() => unparsedPipe.stop());
    stops.push(
      () => kEcho.stop(),
      () => kBulk.stop(),
    );
    const paths = [
      {
        name: 'proxy',
        echo: socksOpener(proxy.socks!, 'echo.shop', 7000),
        bulk: socksDownloadOpener(proxy.socks!, `${bulkService}.shop`, 9000),
        pid: proxy.proc.pid!,
        downloadPid: proxy.proc.pid!,
      },
      ...(proxyB
        ? [
            {
              name: 'proxy B',
              echo: socksOpener(proxyB.socks!, 'echo.shop', 7000),
              bulk: socksDownloadOpener(proxyB.socks!, `${bulkService}.shop`, 9000),
              pid: proxyB.proc.pid!,
              downloadPid: proxyB.proc.pid!,
            },
          ]
        : []),
      {
        name: 'kubectl port-forward',
        echo: tcpOpener('127.0.0.1', kEcho.port),
        bulk: tcpOpener('127.0.0.1', kBulk.port),
        pid: kEcho.pid,
        downloadPid: kBulk.pid,
      },
    ];
    for (const p of paths) {
      await bulkEcho(p.echo, bulkBytes, `${p.name} (warm-up)`);
      await download(p.bulk, `${p.name} (warm-up)`, bulkBytes);
    }
    const figures: Record<string, PathFigures> = {};
    const pipe: PipeFigures = { downMibs: [], downCpu: [] };
    await pipeDownload(unparsedPipe, bulkBytes, 'Node.js unparsed pipe (warm-up)');
    for (let r = 0; r < ROUNDS; r++) {
      const before = cpuSecondsOf(unparsedPipe.pid);
      pipe.downMibs.push(await pipeDownload(unparsedPipe, bulkBytes, `Node.js unparsed pipe, round ${r + 1}`));
      pipe.downCpu.push((cpuSecondsOf(unparsedPipe.pid) - before) / (bulkBytes / 2 ** 30));
      for (const p of paths) {
        const f = (figures[p.name] ??= { echoMibs: [], echoCpu: [], downMibs: [], downCpu: [] });
        let before = cpuSecondsOf(p.pid);
        f.echoMibs.push(await bulkEcho(p.echo, bulkBytes, `${p.name}, round ${r + 1}`));
        f.echoCpu.push((cpuSecondsOf(p.pid) - before) / ((2 * bulkBytes) / 2 ** 30));
        before = cpuSecondsOf(p.downloadPid);
        f.downMibs.push(await download(p.bulk, `${p.name}, round ${r + 1}`, bulkBytes));
        f.downCpu.push((cpuSecondsOf(p.downloadPid) - before) / (bulkBytes / 2 ** 30));
      }
    }
    const latency = await interleavedFirstByteRounds(
      paths.map((p) => ({ name: p.name, echo: p.echo })),
      latencyRounds,
    );
    const where = rttMs === 0 ? 'loopback' : `API server behind a link of ${rttMs} ms round trip`;
    console.log(
      `\nForwarding cost through a real control plane (kube-apiserver v1.37.2, the CRI streaming server; ${where}), ${bulkBytes >> 20} MiB, median of ${ROUNDS} interleaved rounds, ${latencyRounds} connections`,
    );
    console.log(`path                        echo MiB/s  cpu s/GiB   download MiB/s  cpu s/GiB   first byte p50 / p99 ms`);
    for (const p of paths) {
      const f = figures[p.name]!;
      console.log(
        `${p.name.padEnd(28)}${median(f.echoMibs).toFixed(1).padStart(10)}  ${median(f.echoCpu).toFixed(2).padStart(9)}   ${median(f.downMibs).toFixed(1).padStart(14)}  ${median(f.downCpu).toFixed(2).padStart(9)}   ${latency[p.name]!.p50.toFixed(2)} / ${latency[p.name]!.p99.toFixed(2)}`,
      );
    }
    console.log(
      `${'Node.js, unparsed pipe'.padEnd(28)}${'–'.padStart(10)}  ${'–'.padStart(9)}   ${median(pipe.downMibs).toFixed(1).padStart(14)}  ${median(pipe.downCpu).toFixed(2).padStart(9)}   –`,
    );
    const [ours, theirs] = [figures.proxy!, figures['kubectl port-forward']!];
    console.log(ratioLine('unparsed pipe: download CPU per GiB', pipe.downCpu, theirs.downCpu));
    console.log(ratioLine('proxy: download CPU per GiB', ours.downCpu, pipe.downCpu, undefined, undefined, 'the unparsed pipe'));
    if (figures['proxy B']) {
      console.log(ratioLine('B: echo CPU per GiB', figures['proxy B'].echoCpu, theirs.echoCpu, '≤ 0.8', (x) => x <= 0.8));
      console.log(ratioLine('B: download CPU per GiB', figures['proxy B'].downCpu, theirs.downCpu, '≤ 0.8', (x) => x <= 0.8));
      console.log(ratioLine('B: echo CPU per GiB', figures['proxy B'].echoCpu, ours.echoCpu, '< 1', (x) => x < 1, 'the first proxy'));
      console.log(ratioLine('B: download CPU per GiB', figures['proxy B'].downCpu, ours.downCpu, '< 1', (x) => x < 1, 'the first proxy'));
    }
    console.log(ratioLine('echo CPU per GiB', ours.echoCpu, theirs.echoCpu, '≤ 0.8', (x) => x <= 0.8));
    console.log(ratioLine('download CPU per GiB', ours.downCpu, theirs.downCpu, '≤ 0.8', (x) => x <= 0.8));
    console.log(ratioLine('download throughput', ours.downMibs, theirs.downMibs, '≥ 1.1', (x) => x >= 1.1));
    const [lo, lk] = [latency.proxy!, latency['kubectl port-forward']!];
    console.log(
      `first byte p99 (client in this process): ${lo.p99.toFixed(2)} ms against ${lk.p99.toFixed(2)} ms (target ≤ kubectl's: ${lo.p99 <= lk.p99 ? 'met' : 'NOT met'})`,
    );
    for (const p of paths) figures[p.name]!.firstByte = { p50: latency[p.name]!.p50, p99: latency[p.name]!.p99 };
    result.paths = figures;
    result.unparsedPipe = pipe;
  } catch (err) {
    console.log(`\n${rttMs === 0 ? 'loopback' : `${rttMs} ms link`}: FAILED: ${reasonOf(err)}`);
    result.failed = reasonOf(err);
  } finally {
    for (const stop of stops.reverse()) await stop();
  }
  return result;
}

if (!isBuilt()) {
  console.log('Forwarding cost through a real control plane: left out, the test bed is not built (bash test/real-cluster/build.sh)');
  process.exit(0);
}
const cluster = await startRealCluster({ progress: () => undefined });
try {
  await cluster.kubectl(['apply', '-f', '-'], { input: MANIFESTS });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/echo-0', 'pod/bulk-0', 'pod/bulk-link', '--timeout=60s']);
  const links: LinkResult[] = [];
  for (const rtt of [Number(process.env.BENCH_REAL_LOOPBACK ?? 1) ? [0] : [], LINKS].flat()) links.push(await compareOn(cluster, rtt));
  writeResults('real-cost', { apiServer: 'kube-apiserver v1.37.2', links });
} finally {
  await cluster.stop();
}
process.exit(0);
