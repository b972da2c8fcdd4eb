// What forwarding costs, the proxy against real `kubectl port-forward` to the same pod:
//   1. bulk echo: CPU seconds of the forwarding process per GiB moved (both directions counted),
//      the median of BENCH_COST_ROUNDS (7) interleaved rounds after one unmeasured warm-up round each,
//      and the median of the per-round ratios (each round against the one beside it in time);
//   2. connect → first echoed byte, p50 and p99 over BENCH_COST_LATENCY_ROUNDS (3,000) after
//      BENCH_COST_LATENCY_WARMUP (2,500) rounds whose figures are printed apart, the paths taking
//      turns, with the client in this process and in its own (first-byte-client.ts), through the
//      proxy's SOCKS listener and through a port mapping of a second proxy (a plain TCP client,
//      as kubectl's); and each forwarder's CPU per connection over those rounds;
//   3. one-way download: curl through the proxy (socks5h) against curl through kubectl
//      port-forward, BENCH_DOWNLOAD_MB from one HTTP pod, the median of interleaved rounds, with
//      the forwarder's CPU per GiB and how busy this process (the simulated cluster) was meanwhile.
// The download's pod is backed by a bulk server in its own process (a static buffer written over
// and over), so the backend is never what limits the rate: the kubelet, the forwarder and curl are.
// On a 2-core machine the simulated kubelet and API server, one Node thread, can be what limits
// both paths alike (near 100 % of a core): the download ratio then compares the simulator with
// itself, and only the forwarders' CPU per GiB tells them apart.
// Targets: CPU per GiB ≤ 0.9× kubectl's; p99 first byte ≤ kubectl's (a client in its own
// process, through SOCKS5); download ≥ 1.0× kubectl's.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import type { SimCluster } from '../test/sim/cluster.js';
import { bulkEcho, cpuSecondsOf, interleavedFirstByteRounds, median, ratioLine, type FirstByte } from './measure.js';
import type { FirstByteTarget } from './first-byte-client.js';
import { socksOpener, startKubectlPortForward, tcpOpener, type Opener } from './multiplex.js';
import { startBenchProxy } from './npm-layout.js';

const ROUNDS = Number(process.env.BENCH_COST_ROUNDS ?? 7);
const DOWNLOAD_MB = Number(process.env.BENCH_DOWNLOAD_MB ?? 128);
/** A p99 needs many samples (default 3,000: the 30th slowest); the paths take turns so both see the same machine. */
const LATENCY_ROUNDS = process.env.BENCH_COST_LATENCY_ROUNDS === undefined ? undefined : Number(process.env.BENCH_COST_LATENCY_ROUNDS);
/** Rounds before the measured ones (firstByte() says why so many); their figures are printed too. */
const LATENCY_WARMUP = Number(process.env.BENCH_COST_LATENCY_WARMUP ?? 2500);

interface Forwarder {
  name: string;
  pid: number;
  echo: Opener;
  /** curl arguments that fetch `path` from the download pod through this forwarder. */
  curl: (path: string) => string[];
  /** How a client in another process reaches the echo pod through this forwarder. */
  target: FirstByteTarget;
}

const BULK_SERVER = `
const http = require('node:http');
const chunk = require('node:crypto').randomBytes(1 << 20);
http.createServer((req, res) => {
  const n = Number(/^\\/bytes\\/(\\d+)$/.exec(req.url)?.[1] ?? NaN);
  if (!Number.isFinite(n)) { res.writeHead(404); return res.end(); }
  res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': n });
  let left = n;
  const pump = () => {
    while (left > 0) {
      const k = Math.min(left, chunk.length);
      left -= k;
      if (!res.write(k === chunk.length ? chunk : chunk.subarray(0, k))) return void res.once('drain', pump);
    }
    res.end();
  };
  pump();
}).listen(0, '127.0.0.1', function () { console.log(this.address().port); });
`;

async function startBulkServer(): Promise<{ port: number; proc: ChildProcess }> {
  const proc = spawn(process.execPath, ['-e', BULK_SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const started = await Promise.race([
    once(proc.stdout!, 'data').then(([line]) => Number((line as Buffer).toString().trim())),
    once(proc, 'exit').then(([code]) => new Error(`the bulk server exited (${String(code)})`)),
    new Promise<Error>((r) => setTimeout(() => r(new Error('the bulk server did not start within 10 s')), 10_000).unref()),
  ]);
  if (started instanceof Error) {
    proc.kill();
    throw started;
  }
  return { port: started, proc };
}

/** curl in its own process, awaited (never spawnSync: the simulated cluster runs in this process). */
async function curlDownload(args: string[], bytes: number): Promise<{ mibs: number; firstByteMs: number }> {
  const proc = spawn(
    'curl',
    ['-sS', '-o', '/dev/null', '--max-time', '120', '-w', '%{http_code} %{size_download} %{time_total} %{time_starttransfer}', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  proc.stdout.on('data', (c: Buffer) => (out += c));
  proc.stderr.on('data', (c: Buffer) => (err += c));
  // 'close': the process has exited and its output is all read.
  const [status] = (await once(proc, 'close')) as [number | null];
  const [code, size, total, first] = out.trim().split(' ');
  if (status !== 0 || code !== '200' || Number(size) !== bytes)
    throw new Error(`curl ${args.join(' ')}: exit ${status}, HTTP ${code}, ${size} of ${bytes} bytes: ${err.trim()}`);
  return { mibs: bytes / 2 ** 20 / Number(total), firstByteMs: Number(first) * 1000 };
}

/**
 * Connect → one byte → its echo, the forwarders taking turns: `warmup` rounds, then `rounds`
 * measured ones, twice — with the client in this process and in a process of its own.
 *
 * The warm-up is long because the proxy is JIT-compiled: V8 goes on optimizing its connection
 * path for the first ~2,000 connections of its life (compile jobs on worker threads, seen with
 * --trace-opt), while kubectl is compiled ahead of time. Its figures are printed too.
 *
 * The client's own process matters for SOCKS: this process is also the simulated API server and
 * kubelet, and a SOCKS client wakes three times per connection (method, reply, echo) where a
 * port-forward client wakes once, so the simulator's stalls reach it three times. A real client
 * (curl, a browser) is a process of its own; both placements are measured and printed, for the
 * proxy's SOCKS listener and for a port mapping (a plain TCP client, as kubectl's).
 */
async function firstByte(
  forwarders: Forwarder[],
  warmup: number,
  rounds: number,
): Promise<Record<'inProcess' | 'ownProcess' | 'warmup', Record<string, FirstByte>> & { cpuMsPerConnection: Record<string, number> }> {
  const warm = warmup > 0 ? await interleavedFirstByteRounds(forwarders, warmup) : {};
  // CPU per connection of each forwarder over the measured rounds, read once the last ones have
  // been torn down (the runtime holds a closed connection for ~1 s: sim closeGraceMs).
  await new Promise((r) => setTimeout(r, 1500));
  const cpuBefore = forwarders.map((f) => cpuSecondsOf(f.pid));
  const inProcess = await interleavedFirstByteRounds(forwarders, rounds);
  await new Promise((r) => setTimeout(r, 1500));
  const cpuMsPerConnection = Object.fromEntries(forwarders.map((f, i) => [f.name, ((cpuSecondsOf(f.pid) - cpuBefore[i]!) * 1000) / rounds]));
  const child = spawn(
    process.execPath,
    [
      fileURLToPath(new URL('./first-byte-client.js', import.meta.url)),
      JSON.stringify({ paths: forwarders.map((f) => ({ name: f.name, ...f.target })), warmup, rounds }),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c));
  const [code] = (await once(child, 'close')) as [number | null];
  if (code !== 0) throw new Error(`the first-byte client process exited ${code}`);
  return { inProcess, ownProcess: JSON.parse(out) as Record<string, FirstByte>, warmup: warm, cpuMsPerConnection };
}

const MAPPING = 'proxy port mapping';

/** A second proxy with only a port mapping to the echo Service, on a free loopback port. */
async function startPortMapping(kubeconfig: string): Promise<{ forwarder: Forwarder; stop(): Promise<unknown> }> {
  const probe = net.createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise((r) => probe.close(r));
  const proc = await startBenchProxy([
    '--kubeconfig',
    kubeconfig,
    '--listen-socks',
    'off',
    '--forward',
    `127.0.0.1:${port}=echo.data:7000`,
    '--log-level',
    'warn',
    '--transport',
    'spdy',
  ]);
  const forwarder: Forwarder = {
    name: MAPPING,
    pid: proc.proc.pid!,
    echo: tcpOpener('127.0.0.1', port),
    curl: () => [],
    target: { host: '127.0.0.1', port },
  };
  return { forwarder, stop: () => proc.stop() };
}

/**
 * `proxy` is a running proxy (its SOCKS address and pid) on the cluster whose kubeconfig is given;
 * its clients reach data/<echoPod>:7000 as echo.data:7000 (the echo Service).
 */
export async function reportForwardingCost(
  sim: SimCluster,
  kubeconfig: string,
  proxy: { socks: string; pid: number },
  echoPod: string,
  bulkBytes: number,
  latencyRounds: number,
): Promise<void> {
  const kubectlEcho = await startKubectlPortForward(kubeconfig, 'data', echoPod, 7000);
  if (!kubectlEcho) {
    // Every figure here is against kubectl's: without it there is nothing to compare, so the
    // whole section is left out (startKubectlPortForward said only that its row would be).
    console.log('Forwarding cost against kubectl port-forward: left out, kubectl is not on PATH (no target of this section can be judged)');
    return;
  }
  let bulk: { port: number; proc: ChildProcess } | undefined;
  let kubectlBulk: Awaited<ReturnType<typeof startKubectlPortForward>>;
  let mapping: Awaited<ReturnType<typeof startPortMapping>> | undefined;
  try {
    bulk = await startBulkServer();
    await sim.createPod({
      namespace: 'data',
      name: 'bulk-0',
      labels: { app: 'bulk' },
      ports: [{ name: 'http', containerPort: 8080, backend: 'external', target: { host: '127.0.0.1', port: bulk.port } }],
    });
    await sim.createService({ namespace: 'data', name: 'bulk', selector: { app: 'bulk' }, ports: [{ name: 'http', port: 8080, targetPort: 8080 }] });
    kubectlBulk = await startKubectlPortForward(kubeconfig, 'data', 'bulk-0', 8080);
    if (!kubectlBulk) throw new Error('kubectl port-forward to the bulk pod did not start');
    const bulkForward = kubectlBulk;
    const forwarders: Forwarder[] = [
      {
        name: 'proxy',
        pid: proxy.pid,
        echo: socksOpener(proxy.socks, 'echo.data', 7000),
        curl: (p) => ['--socks5-hostname', proxy.socks, `http://bulk.data:8080${p}`],
        target: { socks: proxy.socks, host: 'echo.data', port: 7000 },
      },
      {
        name: 'kubectl port-forward',
        pid: kubectlEcho.pid,
        echo: tcpOpener('127.0.0.1', kubectlEcho.port),
        curl: (p) => [`http://127.0.0.1:${bulkForward.port}${p}`],
        target: { host: '127.0.0.1', port: kubectlEcho.port },
      },
    ];
    // The download through kubectl runs in its second port-forward process: CPU is read there.
    const downloadPid = (f: Forwarder) => (f.name === 'proxy' ? proxy.pid : bulkForward.pid);
    const bytes = DOWNLOAD_MB << 20;
    // Warm-up, one full unmeasured round each: tunnels open, the pod's address known, and the
    // proxy's code optimized by V8 (its first bulk round costs ~1.6× the later ones in CPU).
    for (const f of forwarders) {
      await bulkEcho(f.echo, bulkBytes, `${f.name} (warm-up)`);
      await curlDownload(f.curl(`/bytes/${bytes}`), bytes);
    }
    const echoCpu: Record<string, number[]> = {};
    const echoMibs: Record<string, number[]> = {};
    const down: Record<string, { mibs: number[]; cpu: number[]; first: number[]; simBusy: number[] }> = {};
    for (let r = 0; r < ROUNDS; r++) {
      for (const f of forwarders) {
        const before = cpuSecondsOf(f.pid);
        (echoMibs[f.name] ??= []).push(await bulkEcho(f.echo, bulkBytes, `${f.name}, round ${r + 1}`));
        (echoCpu[f.name] ??= []).push((cpuSecondsOf(f.pid) - before) / ((2 * bulkBytes) / 2 ** 30));
        const pid = downloadPid(f);
        const cpuBefore = cpuSecondsOf(pid);
        // This process is the simulated cluster: its CPU (all its threads, as a share of one core)
        // hints whether the simulated kubelet and API server, one JavaScript thread, set the
        // download's pace rather than the forwarder (near 100 %: likely).
        const simBefore = process.cpuUsage();
        const wallBefore = performance.now();
        const d = await curlDownload(f.curl(`/bytes/${bytes}`), bytes);
        const sim = process.cpuUsage(simBefore);
        const row = (down[f.name] ??= { mibs: [], cpu: [], first: [], simBusy: [] });
        row.mibs.push(d.mibs);
        row.cpu.push((cpuSecondsOf(pid) - cpuBefore) / (bytes / 2 ** 30));
        row.first.push(d.firstByteMs);
        row.simBusy.push((sim.user + sim.system) / 1000 / (performance.now() - wallBefore));
      }
    }
    // A port mapping of a second proxy process (--forward: a plain TCP port, as kubectl
    // port-forward gives): the same client protocol as kubectl's row, so the two differ only in
    // the forwarder. A SOCKS5 client makes two more round trips to the proxy per connection
    // (method, reply), each a wake-up of the client's process.
    mapping = await startPortMapping(kubeconfig);
    const fb = await firstByte([...forwarders, mapping.forwarder], LATENCY_WARMUP, LATENCY_ROUNDS ?? Math.max(latencyRounds, 3000));
    const latency = fb.inProcess;

    const fmt = (v: number[], d = 2) => v.map((x) => x.toFixed(d)).join(' ');
    console.log(`\nForwarding cost against kubectl port-forward (median of ${ROUNDS} interleaved rounds after a warm-up; every round shown)`);
    console.log(`echo ${bulkBytes >> 20} MiB each way      MiB/s    cpu s/GiB   rounds (cpu s/GiB)            first byte p50 / p99 ms`);
    for (const f of forwarders) {
      console.log(
        `${f.name.padEnd(28)} ${median(echoMibs[f.name]!).toFixed(1).padStart(6)}   ${median(echoCpu[f.name]!).toFixed(2).padStart(9)}   ${fmt(echoCpu[f.name]!).padEnd(28)}  ${latency[f.name]!.p50.toFixed(2)} / ${latency[f.name]!.p99.toFixed(2)}`,
      );
    }
    console.log(`download ${DOWNLOAD_MB} MiB (curl)        MiB/s    cpu s/GiB   rounds (MiB/s)                first byte p50 ms   simulator busy`);
    for (const f of forwarders) {
      const d = down[f.name]!;
      console.log(
        `${f.name.padEnd(28)} ${median(d.mibs).toFixed(1).padStart(6)}   ${median(d.cpu).toFixed(2).padStart(9)}   ${fmt(d.mibs, 0).padEnd(28)}  ${median(d.first).toFixed(2).padStart(17)}   ${(100 * median(d.simBusy)).toFixed(0)} % of a core (all threads)`,
      );
    }
    const [ours, theirs] = forwarders.map((f) => f.name) as [string, string];
    console.log(ratioLine('echo CPU per GiB', echoCpu[ours]!, echoCpu[theirs]!, '≤ 0.90', (r) => r <= 0.9));
    console.log(ratioLine('download CPU per GiB', down[ours]!.cpu, down[theirs]!.cpu));
    // Every placement is printed with its comparison; the target is judged on the client in a
    // process of its own, as curl and browsers are (docs/performance.md, "Which first-byte line
    // is the target"). With the client in this process — also the simulated API server and
    // kubelet — a SOCKS5 client's two extra round trips to the proxy each wait for this event
    // loop: the port mapping line, a plain TCP client as kubectl's, shows what the forwarder adds.
    const p99Line = (path: string, what: string, r: Record<string, FirstByte>) =>
      `first byte p99, ${path}, ${what}: ${r[path]!.p99.toFixed(2)} ms against ${r[theirs]!.p99.toFixed(2)} ms (p50 ${r[path]!.p50.toFixed(2)} against ${r[theirs]!.p50.toFixed(2)}): ${r[path]!.p99 <= r[theirs]!.p99 ? '≤' : '>'} kubectl's`;
    console.log(p99Line(ours, "client in the simulator's process", fb.inProcess));
    console.log(p99Line(ours, 'client in its own process', fb.ownProcess));
    console.log(p99Line(MAPPING, "client in the simulator's process", fb.inProcess));
    console.log(p99Line(MAPPING, 'client in its own process', fb.ownProcess));
    const own = fb.ownProcess;
    console.log(
      `first byte p99 through the proxy, client in its own process (target ≤ kubectl's): ${own[ours]!.p99.toFixed(2)} ms against ${own[theirs]!.p99.toFixed(2)} ms: ${own[ours]!.p99 <= own[theirs]!.p99 ? 'met' : 'NOT met'}`,
    );
    console.log(
      `CPU per connection (connect, one byte each way, close; measured rounds): ${fb.cpuMsPerConnection[ours]!.toFixed(3)} ms against ${fb.cpuMsPerConnection[theirs]!.toFixed(3)} ms (${(fb.cpuMsPerConnection[ours]! / fb.cpuMsPerConnection[theirs]!).toFixed(2)} ×); port mapping ${fb.cpuMsPerConnection[MAPPING]!.toFixed(3)} ms`,
    );
    if (LATENCY_WARMUP > 0)
      console.log(
        `first byte during the ${LATENCY_WARMUP} warm-up rounds (the proxy still being optimized; client in the simulator's process): p50 / p99 ${fb.warmup[ours]!.p50.toFixed(2)} / ${fb.warmup[ours]!.p99.toFixed(2)} ms against ${fb.warmup[theirs]!.p50.toFixed(2)} / ${fb.warmup[theirs]!.p99.toFixed(2)} ms`,
      );
    console.log(ratioLine('echo throughput', echoMibs[ours]!, echoMibs[theirs]!, '≥ 1.0', (r) => r >= 1));
    console.log(ratioLine('download throughput', down[ours]!.mibs, down[theirs]!.mibs, '≥ 1.0', (r) => r >= 1));
  } finally {
    kubectlEcho.stop();
    kubectlBulk?.stop();
    await mapping?.stop();
    bulk?.proc.kill();
    await sim.deleteService('data', 'bulk').catch(() => undefined);
    await sim.deletePod('data', 'bulk-0').catch(() => undefined);
  }
}
