// `npm run bench`, multiplexed-tunnel section (issue 5): the same echo pod reached by
//  (a) the proxy over one SPDY/3.1 tunnel per pod (the default transport),
//  (b) the proxy with one port-forward WebSocket per stream (--transport websocket),
//  (c) real `kubectl port-forward` (SPDY tunnelled in a WebSocket, kubectl ≥ 1.31),
//  (d) direct TCP;
// connect → first echoed byte p50/p99, new connections per second, bulk throughput, and 200
// concurrent streams over one tunnel. Targets: (a) p50 ≤ 0.5 × (b); (a) throughput ≥ 1.0 × (c).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, delimiter } from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { socks5Connect } from '../test/helpers/socks-client.js';
import { startBenchProxy } from './npm-layout.js';
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
  const kubectl = (process.env.PATH ?? '').split(delimiter).map((d) => join(d, 'kubectl')).find((p) => existsSync(p));
  if (!kubectl) {
    console.log('kubectl is not on PATH: the kubectl port-forward row is left out');
    return undefined;
  }
  const proc: ChildProcess = spawn(kubectl, ['--kubeconfig', kubeconfig, '-n', namespace, 'port-forward', `pod/${pod}`, `:${port}`, '--address', '127.0.0.1'], { stdio: ['ignore', 'pipe', 'pipe'] });
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
  await Promise.all(Array.from({ length: workers }, async () => {
    while (Date.now() < until) {
      try {
        const s = await open();
        const ok = await echoOnce(s, Buffer.from('c'));
        s.destroy();
        if (ok) done++;
        else countFailure(failures, 'echo failed or mismatched');
      } catch (err) {
        countFailure(failures, (err as Error).message.split('\n')[0]!.slice(0, 80));
      }
    }
  }));
  return { perSecond: done / (Number(process.hrtime.bigint() - started) / 1e9), failures };
}

function echoOnce(stream: Duplex, payload: Buffer): Promise<boolean> {
  return new Promise((resolve) => {
    const got: Buffer[] = [];
    let n = 0;
    const onData = (d: Buffer) => {
      got.push(d);
      n += d.length;
      if (n >= payload.length) {
        stream.off('data', onData);
        resolve(Buffer.concat(got).equals(payload));
      }
    };
    stream.on('data', onData);
    stream.once('error', () => resolve(false));
    stream.write(payload);
  });
}

/** N streams open at once through `open`, 64 KiB each way per stream, sha256-checked. */
export async function concurrentIntact(open: Opener, n: number): Promise<number> {
  const streams = await Promise.all(Array.from({ length: n }, () => open().catch(() => undefined)));
  const ok = await Promise.all(streams.map(async (s) => {
    if (!s) return false;
    const payload = randomBytes(64 * 1024);
    const back = await new Promise<Buffer>((resolve) => {
      const got: Buffer[] = [];
      let len = 0;
      s.on('data', (d: Buffer) => {
        got.push(d);
        len += d.length;
        if (len >= payload.length) resolve(Buffer.concat(got));
      });
      s.once('error', () => resolve(Buffer.alloc(0)));
      s.write(payload);
    });
    s.destroy();
    return createHash('sha256').update(back).digest('hex') === createHash('sha256').update(payload).digest('hex');
  }));
  return ok.filter(Boolean).length;
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
    console.log(`${name.padEnd(34)} ${f.throughput.toFixed(1).padStart(7)}   ${f.p50.toFixed(2).padStart(6)}   ${f.p99.toFixed(2).padStart(6)}   ${f.cps.toFixed(0).padStart(7)}   ${String(failed).padStart(6)}   ${cpu.padStart(9)}`);
  }
  for (const [name, f] of Object.entries(rows)) {
    if (f && Object.keys(f.cpsFailures).length > 0) console.log(`  conn/s failures on ${name}: ${describeFailures(f.cpsFailures)}`);
  }
  const fresh = await startBenchProxy(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn', '--transport', 'spdy']);
  const before = sim.counters.portForward;
  const intact = await concurrentIntact(socksOpener(fresh.socks!, 'echo.data', 7000), concurrent);
  const tunnels = sim.counters.portForward - before;
  await fresh.stop();
  console.log(`${concurrent} concurrent streams through a fresh proxy (a): ${intact} intact (64 KiB each way, sha256) over ${tunnels} ${tunnels === 1 ? 'tunnel' : 'tunnels'}`);
  const row = (k: string) => Object.entries(rows).find(([name]) => name.startsWith(k))?.[1];
  const [a, b, c] = [row('(a)'), row('(b)'), row('(c)')];
  if (a && b) console.log(`target (a) p50 ≤ 0.50 × (b): ${(a.p50 / b.p50).toFixed(2)} × — ${a.p50 <= 0.5 * b.p50 ? 'met' : 'NOT met'}`);
  if (a && c) console.log(`target (a) throughput ≥ 1.00 × (c): ${(a.throughput / c.throughput).toFixed(2)} × — ${a.throughput >= c.throughput ? 'met' : 'NOT met'}`);
  if (a?.cpuPerGiB && c?.cpuPerGiB) console.log(`(a) forwarding CPU per GiB vs (c): ${(a.cpuPerGiB / c.cpuPerGiB).toFixed(2)} ×`);
  console.log(`target ${concurrent} concurrent streams intact: ${intact === concurrent ? 'met' : 'NOT met'}`);
}
