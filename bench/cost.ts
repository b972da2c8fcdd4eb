// The forwarding-cost section of the bench on its own (`npm run bench:cost`, ~2 minutes): a fresh
// simulated cluster, a fresh proxy in the npm package form, and real kubectl port-forward
// (bench/forwarding-cost.ts), then CPU per GiB across fresh proxy processes with and without the
// GC guard (bench/gc-guard.ts), and what short connections leave for the young-generation
// collector (bench/gc-survivors.ts). For working on the data path without the whole bench.
import { apiGet, startTestCluster } from '../test/helpers/cluster.js';
import { reportForwardingCost } from './forwarding-cost.js';
import { startBenchProxy } from './npm-layout.js';
import { reportGcGuard } from './gc-guard.js';
import { reportGcSurvivors } from './gc-survivors.js';

const cluster = await startTestCluster({ namespace: 'data' });
const proxy = await startBenchProxy(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn', '--transport', 'spdy']);
process.on('exit', () => proxy.proc.kill());
try {
  const pods = (await apiGet(cluster.sim, '/api/v1/namespaces/data/pods')) as { items: Array<{ metadata: { name: string } }> };
  const echoPod = pods.items.find((p) => p.metadata.name.startsWith('echo'))?.metadata.name;
  if (!echoPod) throw new Error('no echo pod in data');
  await reportForwardingCost(
    cluster.sim,
    cluster.kubeconfig,
    { socks: proxy.socks!, pid: proxy.proc.pid! },
    echoPod,
    Number(process.env.BENCH_BULK_MB ?? 256) << 20,
    1000,
  );
  await reportGcGuard(cluster.kubeconfig, Number(process.env.BENCH_BULK_MB ?? 256) << 20);
  await reportGcSurvivors(cluster.sim, cluster.kubeconfig);
} finally {
  await proxy.stop();
  await cluster.close();
}
// As in run.ts: the simulated cluster's handles would keep the process alive.
process.exit(0);
