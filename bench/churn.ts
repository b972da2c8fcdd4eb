// Sustained connection churn through the proxy: 16 clients open a stream, echo a byte, close,
// for a minute. Conn/s at the start and at the end should match (nothing accumulates), every
// failure is named with its reason, and RSS, file descriptors and the kubelet's stream pairs
// come back to where they were within seconds after it stops.
import { readdirSync, readFileSync } from 'node:fs';
import type { SimCluster } from '../test/sim/cluster.js';
import type { Duplex } from 'node:stream';
import { countFailure, describeFailures, type Failures, type Opener } from './multiplex.js';
import { reasonOf, roundTrip } from './measure.js';

const WORKERS = 16;
const WINDOW_MS = 5_000;

const fds = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;
const rss = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

export async function reportChurn(open: Opener, pid: number, sim: SimCluster, seconds: number): Promise<void> {
  await new Promise((r) => setTimeout(r, 3_000));
  const before = { rss: rss(pid), fds: fds(pid), pairs: sim.openSpdyStreamPairs };
  const failures: Failures = {};
  const started = Date.now();
  const until = started + seconds * 1000;
  const doneAt: number[] = [];
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      while (Date.now() < until) {
        let s: Duplex;
        try {
          s = await open();
        } catch (err) {
          countFailure(failures, `opening failed: ${reasonOf(err)}`);
          continue;
        }
        // The byte must come back as sent: any byte, or a close, is not an echo.
        const failure = await roundTrip(s, Buffer.from('c'), true);
        if (failure) countFailure(failures, failure);
        else doneAt.push(Date.now());
      }
    }),
  );
  const rate = (from: number) => doneAt.filter((t) => t >= from && t < from + WINDOW_MS).length / (WINDOW_MS / 1000);
  const atStart = rate(started);
  const atEnd = rate(until - WINDOW_MS);
  const peak = { rss: rss(pid), fds: fds(pid) };
  await new Promise((r) => setTimeout(r, 5_000));
  const after = { rss: rss(pid), fds: fds(pid), pairs: sim.openSpdyStreamPairs };
  console.log(
    `\nchurn ${seconds} s, ${WORKERS} clients (SPDY tunnel): ${doneAt.length} connections, conn/s ${atStart.toFixed(0)} in the first 5 s and ${atEnd.toFixed(0)} in the last 5 s (${atStart > 0 ? `${(atEnd / atStart).toFixed(2)} ×` : 'no ratio: none completed in the first 5 s'}); ` +
      `failures through proxy (SOCKS5): ${describeFailures(failures)}\n` +
      `  proxy RSS ${before.rss.toFixed(0)} → ${peak.rss.toFixed(0)} at the end → ${after.rss.toFixed(0)} MiB 5 s later; fds ${before.fds} → ${peak.fds} → ${after.fds}; kubelet stream pairs ${before.pairs} → ${after.pairs}`,
  );
}
