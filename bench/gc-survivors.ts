// What short connections leave behind for V8's young-generation collector, per connection: the
// bytes the proxy allocated, the bytes that survived a scavenge (copied) and were promoted to the
// old generation, and the mean scavenge pause, from `node --trace-gc-nvp` on a fresh proxy that
// serves sequential SOCKS connect → one byte → echo → close rounds. Two ways of closing:
//  - as containerd does (the simulated kubelet's default): a half-closed stream stays ~1 s, so
//    every connection is alive at the next scavenge — what it holds while it lingers is copied;
//  - at once (closeGraceMs 0): nothing should survive; what does is held by something else
//    (docs/performance.md, "What a lingering connection holds").
// The first-byte tail in bench/forwarding-cost.ts moves with these pauses.
import type { SimCluster } from '../test/sim/cluster.js';
import { startBenchProxy } from './npm-layout.js';
import { socksOpener } from './multiplex.js';
import { interleavedFirstByteRounds } from './measure.js';

const field = (line: string, key: string): number => Number(new RegExp(`\\b${key}=([0-9.]+)`).exec(line)?.[1] ?? NaN);

export async function reportGcSurvivors(sim: SimCluster, kubeconfig: string, rounds = 4000): Promise<void> {
  console.log(
    `\nYoung-generation survivors per connection (fresh proxy with --trace-gc-nvp; ${rounds} sequential connect → byte → echo → close rounds after 1,500 unmeasured)`,
  );
  console.log('runtime close                  allocated   survived   promoted   scavenges   mean pause ms');
  const saved = sim.closeGraceMs;
  try {
    for (const [label, graceMs] of [
      ['after ~1 s (containerd)', 1000],
      ['at once', 0],
    ] as const) {
      sim.closeGraceMs = graceMs;
      const proxy = await startBenchProxy(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn', '--transport', 'spdy'], {
        nodeFlags: ['--trace-gc-nvp'],
      });
      try {
        const path = [{ name: 'proxy', echo: socksOpener(proxy.socks!, 'echo.data', 7000) }];
        await interleavedFirstByteRounds(path, 1500);
        const mark = proxy.stdout.length;
        await interleavedFirstByteRounds(path, rounds);
        const scavenges = proxy.stdout.slice(mark).filter((l) => / gc=s /.test(l));
        if (scavenges.length === 0) {
          // A figure of 0 would read as "nothing survived": say what is missing instead.
          console.log(`${label.padEnd(28)} no scavenge lines in the proxy's --trace-gc-nvp output; no figures`);
          continue;
        }
        const sum = (key: string) => scavenges.reduce((n, l) => n + field(l, key), 0);
        const perConn = (key: string) => `${(sum(key) / rounds / 1024).toFixed(1)} KiB`.padStart(9);
        console.log(
          `${label.padEnd(28)} ${perConn('allocated')}  ${perConn('new_space_survived')}  ${perConn('promoted')}   ${String(scavenges.length).padStart(9)}   ${(sum('pause') / Math.max(1, scavenges.length)).toFixed(2).padStart(13)}`,
        );
      } finally {
        await proxy.stop();
      }
    }
  } finally {
    sim.closeGraceMs = saved;
  }
}
