// What the live page costs the proxy (ui/feed.ts, ui/page-server.ts): its CPU and memory while it
// serves a steady RATE new connections a second (SOCKS, open, echo a byte, close), first with its
// page closed, then open — a client reading the page's event stream as a browser tab does — then
// closed again, side by side with the ratios. The load runs throughout; each phase is a window of
// it. Alone: `npm run build && node dist/bench/page-cost.js`; also part of `npm run bench`.
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { startBenchProxy } from './npm-layout.js';
import { cpuSecondsOf, reasonOf, roundTrip } from './measure.js';
import { countFailure, describeFailures, socksOpener, type Failures } from './multiplex.js';

const RATE = Number(process.env.BENCH_PAGE_RATE ?? 1000);
/** Seconds per phase (three phases, after a warm-up of the same length). */
const PHASE_S = Number(process.env.BENCH_PAGE_SECONDS ?? 8);
/** Connections in flight at most: a slower proxy shows as a lower rate, not as an unbounded pile. */
const MAX_IN_FLIGHT = 256;
const TICK_MS = 10;

interface Phase {
  name: string;
  connections: number;
  cpuPercent: number;
  rssMeanMiB: number;
  rssMaxMiB: number;
  /** The event stream's bytes a second (page open only). */
  feedBytesPerSecond?: number;
}

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

/** Starts connections at RATE a second (TICK_MS batches) until stop(); counts completions and failures. */
function steadyLoad(open: ReturnType<typeof socksOpener>): { completed(): number; failures: Failures; stop(): Promise<void> } {
  const failures: Failures = {};
  let completed = 0;
  let inFlight = 0;
  let owed = 0;
  const running = new Set<Promise<void>>();
  const one = async () => {
    inFlight++;
    try {
      const s = await open();
      const failure = await roundTrip(s, Buffer.from('p'), true);
      if (failure) countFailure(failures, failure);
      else completed++;
    } catch (err) {
      countFailure(failures, `opening failed: ${reasonOf(err)}`);
    } finally {
      inFlight--;
    }
  };
  const timer = setInterval(() => {
    owed += (RATE * TICK_MS) / 1000;
    for (; owed >= 1 && inFlight < MAX_IN_FLIGHT; owed--) {
      const p = one();
      running.add(p);
      void p.finally(() => running.delete(p));
    }
    // Behind by more than a tick's worth: those are not made up later (the rate shows it).
    owed = Math.min(owed, (RATE * TICK_MS) / 1000);
  }, TICK_MS);
  return {
    completed: () => completed,
    failures,
    async stop() {
      clearInterval(timer);
      await Promise.all(running);
    },
  };
}

/** Reads the page's event stream to its end (as a browser tab would); counts its bytes. */
function readEvents(pageUrl: URL): { bytes(): number; close(): void } {
  let bytes = 0;
  const req = http.get({ host: pageUrl.hostname, port: pageUrl.port, path: `/ui/events${pageUrl.search}` }, (res) => {
    if (res.statusCode !== 200) console.log(`the page's event stream answered ${res.statusCode}: the open phase is not one`);
    res.on('data', (c: Buffer) => (bytes += c.length));
  });
  req.on('error', () => undefined);
  return { bytes: () => bytes, close: () => req.destroy() };
}

async function measure(name: string, pid: number, load: ReturnType<typeof steadyLoad>, feed?: ReturnType<typeof readEvents>): Promise<Phase> {
  const rss: number[] = [];
  const sampler = setInterval(() => rss.push(rssMiB(pid)), 250);
  const start = { cpu: cpuSecondsOf(pid), at: Date.now(), done: load.completed(), feed: feed?.bytes() ?? 0 };
  await new Promise((r) => setTimeout(r, PHASE_S * 1000));
  clearInterval(sampler);
  const seconds = (Date.now() - start.at) / 1000;
  return {
    name,
    connections: (load.completed() - start.done) / seconds,
    cpuPercent: ((cpuSecondsOf(pid) - start.cpu) / seconds) * 100,
    rssMeanMiB: rss.reduce((a, b) => a + b, 0) / Math.max(1, rss.length),
    rssMaxMiB: Math.max(...rss),
    ...(feed ? { feedBytesPerSecond: (feed.bytes() - start.feed) / seconds } : {}),
  };
}

export async function reportPageCost(kubeconfig: string, target = { host: 'echo.data', port: 7000 }): Promise<Phase[]> {
  // An HTTP listener on TCP: the proxy serves its page there.
  const listen = ['--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0'];
  const proxy = await startBenchProxy(['--kubeconfig', kubeconfig, ...listen, '--log-level', 'warn', '--transport', 'spdy']);
  try {
    const line = proxy.stdout.find((l) => l.includes('live page at'));
    if (!line) throw new Error(`the proxy printed no live page URL:\n${proxy.stdout.join('\n')}`);
    const pageUrl = new URL(/live page at (\S+)/.exec(line)![1]!);
    const pid = proxy.proc.pid!;
    const load = steadyLoad(socksOpener(proxy.socks!, target.host, target.port));
    await new Promise((r) => setTimeout(r, PHASE_S * 1000)); // warm-up: tunnels open, V8 optimized
    const phases = [await measure('page closed', pid, load)];
    const feed = readEvents(pageUrl);
    await new Promise((r) => setTimeout(r, 1_000)); // its snapshot in
    phases.push(await measure('page open', pid, load, feed));
    feed.close();
    await new Promise((r) => setTimeout(r, 1_000));
    phases.push(await measure('page closed again', pid, load));
    await load.stop();
    const closed = (pick: (p: Phase) => number) => (pick(phases[0]!) + pick(phases[2]!)) / 2;
    const open = phases[1]!;
    console.log(`\nthe live page's cost: a proxy serving ${RATE} new connections/s (SOCKS, SPDY tunnel), ${PHASE_S} s per phase`);
    console.log('phase                conn/s   proxy CPU %   RSS mean MiB   RSS max MiB   event stream KiB/s');
    for (const p of phases)
      console.log(
        `${p.name.padEnd(19)} ${p.connections.toFixed(0).padStart(7)}   ${p.cpuPercent.toFixed(1).padStart(11)}   ${p.rssMeanMiB.toFixed(1).padStart(12)}   ${p.rssMaxMiB
          .toFixed(1)
          .padStart(11)}   ${p.feedBytesPerSecond !== undefined ? (p.feedBytesPerSecond / 1024).toFixed(1).padStart(18) : '-'.padStart(18)}`,
      );
    console.log(
      `page open vs closed: CPU ${(open.cpuPercent / closed((p) => p.cpuPercent)).toFixed(2)} ×, RSS mean ${(open.rssMeanMiB / closed((p) => p.rssMeanMiB)).toFixed(2)} ×, ` +
        `conn/s ${(open.connections / closed((p) => p.connections)).toFixed(2)} ×; failures: ${describeFailures(load.failures)}`,
    );
    return phases;
  } finally {
    await proxy.stop();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { startTestCluster } = await import('../test/helpers/cluster.js');
  const cluster = await startTestCluster({ namespace: 'data' });
  try {
    console.log(`kubectl-proxyout live page cost — node ${process.version}, ${new Date().toISOString()}, load ${os.loadavg()[0]!.toFixed(2)}`);
    await reportPageCost(cluster.kubeconfig);
  } finally {
    await cluster.close();
  }
  process.exit(0);
}
