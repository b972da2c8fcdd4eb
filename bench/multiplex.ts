// `npm run bench`, multiplexed-tunnel section: the same echo pod reached by
//  (a) the proxy over one SPDY/3.1 tunnel per pod (the default transport),
//  (b) the proxy with one port-forward WebSocket per stream (--transport websocket),
//  (c) real `kubectl port-forward` (SPDY tunnelled in a WebSocket, kubectl ≥ 1.31),
//  (d) direct TCP;
// connect → first echoed byte p50/p99, new connections per second, bulk throughput, and 200
// concurrent streams over one tunnel. Targets: (a) p50 ≤ 0.5 × (b); (a) throughput ≥ 1.0 × (c).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, delimiter } from 'node:path';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { socks5Connect } from '../test/helpers/socks-client.js';
import { startBenchProxy } from './npm-layout.js';
import { judge, reasonOf, roundTrip } from './measure.js';
import type { SimCluster } from '../test/sim/cluster.js';

export type Opener = () => Promise<Duplex>;

export function socksOpener(proxy: string, host: string, port: number): Opener {
  return async () => {
    const { reply, socket, rest } = await socks5Connect(proxy, host, port);
    if (reply !== 0 || rest.length) throw new Error(`SOCKS reply ${reply}`);
    socket.resume();
    socket.removeAllListeners('data');
    return socket;
  };
}

export function tcpOpener(host: string, port: number): Opener {
  return () =>
    new Promise((resolve, reject) => {
      const s = net.connect(port, host, () => resolve(s));
      s.setNoDelay(true);
      s.once('error', reject);
    });
}

export interface KubectlForward {
  port: number;
  pid: number;
  stop(): void;
}

/** `kubectl port-forward pod/NAME :PORT`, or undefined (with the reason printed) without kubectl. */
export async function startKubectlPortForward(kubeconfig: string, namespace: string, pod: string, port: number): Promise<KubectlForward | undefined> {
  const kubectl = (process.env.PATH ?? '')
    .split(delimiter)
    .map((d) => join(d, 'kubectl'))
    .find((p) => existsSync(p));
  if (!kubectl) {
    console.log('kubectl is not on PATH: the kubectl port-forward row is left out');
    return undefined;
  }
  const proc: ChildProcess = spawn(kubectl, ['--kubeconfig', kubeconfig, '-n', namespace, 'port-forward', `pod/${pod}`, `:${port}`, '--address', '127.0.0.1'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c));
  proc.stderr!.on('data', (c: Buffer) => (out += c));
  const local = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kubectl port-forward did not start: ${out}`)), 15_000);
    proc.stdout!.on('data', () => {
      const m = /Forwarding from 127\.0\.0\.1:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.once('exit', (code) => reject(new Error(`kubectl exited with ${code}: ${out}`)));
  });
  return { port: local, pid: proc.pid!, stop: () => proc.kill('SIGTERM') };
}

/** What a measuring loop saw fail: reason → count (never hidden: the tables print every one). */
export type Failures = Record<string, number>;

export const countFailure = (failures: Failures, reason: string): void => {
  failures[reason] = (failures[reason] ?? 0) + 1;
};

/** "3 × SOCKS reply 1, 1 × echo mismatch", or "none". */
export function describeFailures(failures: Failures): string {
  const entries = Object.entries(failures).sort((a, b) => b[1] - a[1]);
  return entries.length === 0 ? 'none' : entries.map(([why, n]) => `${n} × ${why}`).join(', ');
}

/** Open → 1-byte round trip → close, from `workers` loops at once for `ms`: completed per second, and every failure with its reason. */
export async function connectionsPerSecond(open: Opener, ms: number, workers = 8): Promise<{ perSecond: number; failures: Failures }> {
  let done = 0;
  const failures: Failures = {};
  const until = Date.now() + ms;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (Date.now() < until) {
        let s: Duplex;
        try {
          s = await open();
        } catch (err) {
          countFailure(failures, `opening failed: ${reasonOf(err)}`);
          continue;
        }
        const failure = await roundTrip(s, Buffer.from('c'), true);
        if (failure) countFailure(failures, failure);
        else done++;
      }
    }),
  );
  return { perSecond: done / (Number(process.hrtime.bigint() - started) / 1e9), failures };
}

/** N streams open at once through `open`, 64 KiB each way per stream, each byte checked: how many came back intact, and why the others did not. */
export async function concurrentIntact(open: Opener, n: number): Promise<{ intact: number; failures: Failures }> {
  const failures: Failures = {};
  const streams = await Promise.all(
    Array.from({ length: n }, () => open().catch((err: unknown) => void countFailure(failures, `opening failed: ${reasonOf(err)}`))),
  );
  const ok = await Promise.all(
    streams.map(async (s) => {
      if (!s) return false;
      const failure = await roundTrip(s, randomBytes(64 * 1024), true);
      if (failure) countFailure(failures, failure);
      return !failure;
    }),
  );
  return { intact: ok.filter(Boolean).length, failures };
}

export interface PathFigures {
  throughput: number;
  /** CPU seconds the forwarding process spent per GiB moved (both directions), if it is a process of its own. */
  cpuPerGiB?: number;
  p50: number;
  p99: number;
  cps: number;
  /** Connections that failed while measuring cps, by reason. */
  cpsFailures: Failures;
}

/**
 * Prints the (a)–(d) table (row names start with "(a)" … "(d)"), then opens `concurrent` streams
 * at once through a fresh proxy (--transport spdy) so that exactly one tunnel is new, and the targets.
 */
export async function reportMultiplex(sim: SimCluster, kubeconfig: string, rows: Record<string, PathFigures | undefined>, concurrent: number): Promise<void> {
  console.log('\nMultiplexed tunnel: (a) proxy, SPDY tunnel per pod · (b) proxy, WebSocket per stream · (c) kubectl port-forward · (d) direct TCP');
  console.log('path                                 MiB/s   p50 ms   p99 ms    conn/s   failed   cpu s/GiB');
  for (const [name, f] of Object.entries(rows)) {
    if (!f) continue;
    const cpu = f.cpuPerGiB === undefined ? '-' : f.cpuPerGiB.toFixed(2);
    const failed = Object.values(f.cpsFailures).reduce((a, b) => a + b, 0);
    console.log(
      `${name.padEnd(34)} ${f.throughput.toFixed(1).padStart(7)}   ${f.p50.toFixed(2).padStart(6)}   ${f.p99.toFixed(2).padStart(6)}   ${f.cps.toFixed(0).padStart(7)}   ${String(failed).padStart(6)}   ${cpu.padStart(9)}`,
    );
  }
  for (const [name, f] of Object.entries(rows)) {
    if (f && Object.keys(f.cpsFailures).length > 0) console.log(`  conn/s failures on ${name}: ${describeFailures(f.cpsFailures)}`);
  }
  const fresh = await startBenchProxy(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn', '--transport', 'spdy']);
  const before = sim.counters.portForward;
  const concurrentRun = await concurrentIntact(socksOpener(fresh.socks!, 'echo.data', 7000), concurrent);
  const tunnels = sim.counters.portForward - before;
  await fresh.stop();
  for (const line of multiplexTargets(rows, concurrent, concurrentRun, tunnels)) console.log(line);
}

const failureCount = (f: Failures) => Object.values(f).reduce((a, b) => a + b, 0);

/**
 * The concurrent-streams line and the target lines of the (a)–(d) table. A comparison is judged
 * only when neither side lost a connection while measuring (its conn/s failures): a path that
 * failed some rounds is not compared as if it had not.
 */
export function multiplexTargets(
  rows: Record<string, PathFigures | undefined>,
  concurrent: number,
  run: { intact: number; failures: Failures },
  tunnels: number,
): string[] {
  const out = [
    `${concurrent} concurrent streams through a fresh proxy (a): ${run.intact} intact (64 KiB each way, each byte checked) over ${tunnels} ${tunnels === 1 ? 'tunnel' : 'tunnels'}; failures: ${describeFailures(run.failures)}`,
  ];
  const row = (k: string) => Object.entries(rows).find((e): e is [string, PathFigures] => e[1] !== undefined && e[0].startsWith(k));
  const [a, b, c] = [row('(a)'), row('(b)'), row('(c)')];
  const failed = (...sides: Array<[string, PathFigures]>) => sides.map(([name, f]): [string, number] => [name, failureCount(f.cpsFailures)]);
  if (a && b)
    out.push(`target (a) p50 ≤ 0.50 × (b): ${(a[1].p50 / b[1].p50).toFixed(2)} × — ${judge(a[1].p50 <= 0.5 * b[1].p50, [a[1].p50, b[1].p50], failed(a, b))}`);
  if (a && c)
    out.push(
      `target (a) throughput ≥ 1.00 × (c): ${(a[1].throughput / c[1].throughput).toFixed(2)} × — ${judge(a[1].throughput >= c[1].throughput, [a[1].throughput, c[1].throughput], failed(a, c))}`,
    );
  if (a?.[1].cpuPerGiB && c?.[1].cpuPerGiB) out.push(`(a) forwarding CPU per GiB vs (c): ${(a[1].cpuPerGiB / c[1].cpuPerGiB).toFixed(2)} ×`);
  out.push(`target ${concurrent} concurrent streams intact: ${judge(run.intact === concurrent, [run.intact])}`);
  return out;
}
