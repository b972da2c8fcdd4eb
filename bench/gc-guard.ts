// Echo CPU per GiB across fresh proxy processes, with the GC guard (src/core/gc-guard.ts) and
// without it (`node --incremental-marking`, which the guard leaves alone: V8's default). Without
// the guard, whether a process falls into V8's mark-compact loop during bulk transfers is chance,
// so one process's figure says little: this runs several of each, interleaved, and prints every
// process's figure and the spread.
import { startBenchProxy } from './npm-layout.js';
import { socksOpener } from './multiplex.js';
import { bulkEcho, cpuSecondsOf, median } from './measure.js';

interface Group {
  name: string;
  nodeFlags: string[];
  perProcess: number[][];
}

export async function reportGcGuard(kubeconfig: string, bulkBytes: number, processes = 4, rounds = 2): Promise<void> {
  const groups: Group[] = [
    { name: 'guard on (as shipped)', nodeFlags: [], perProcess: [] },
    { name: 'V8 default (--incremental-marking)', nodeFlags: ['--incremental-marking'], perProcess: [] },
  ];
  const started = [];
  try {
    for (let i = 0; i < processes; i++) {
      for (const g of groups) {
        const proxy = await startBenchProxy(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn', '--transport', 'spdy'], {
          nodeFlags: g.nodeFlags,
        });
        started.push(proxy);
        g.perProcess.push([]);
      }
    }
    const gib = (2 * bulkBytes) / (1 << 30);
    // Round 0 is unmeasured (JIT warm-up, first tunnel); then `rounds` measured, process by process.
    for (let r = 0; r <= rounds; r++) {
      for (let i = 0; i < processes; i++) {
        for (const [gi, g] of groups.entries()) {
          const proxy = started[i * groups.length + gi]!;
          const before = cpuSecondsOf(proxy.proc.pid!);
          await bulkEcho(socksOpener(proxy.socks!, 'echo.data', 7000), bulkBytes, `proxy ${i + 1} of ${processes}, ${g.name}, round ${r}`);
          if (r > 0) g.perProcess[i]!.push((cpuSecondsOf(proxy.proc.pid!) - before) / gib);
        }
      }
    }
  } finally {
    await Promise.all(started.map((p) => p.stop()));
  }
  const mb = bulkBytes >> 20;
  console.log(
    `\nEcho CPU per GiB in ${processes} fresh proxy processes per kind (${mb} MiB each way per round; one unmeasured round, then the median of ${rounds})`,
  );
  const best = Math.min(...groups.flatMap((g) => g.perProcess.map(median)));
  for (const g of groups) {
    const figures = g.perProcess.map(median);
    const slow = figures.filter((f) => f > 1.3 * best).length;
    console.log(
      `${g.name.padEnd(36)} ${figures.map((f) => f.toFixed(2)).join(' ')}   median ${median(figures).toFixed(2)}, worst ${Math.max(...figures).toFixed(2)} cpu s/GiB; ${slow} of ${processes} more than 1.3 × the best process`,
    );
  }
}
