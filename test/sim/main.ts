// Runs the simulated cluster with the sample objects until SIGINT/SIGTERM.
//   node dist/test/sim/main.js [kubeconfig-path]     (SIM_HOST, SIM_PORT: where the API server listens)
// Prints one JSON line on stdout: {"server","kubeconfig","adminToken","pid"}.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { SimCluster } from './cluster.js';
import { seedSampleCluster } from './sample.js';

async function main(): Promise<void> {
  const sim = await SimCluster.start({ quiet: true, host: process.env.SIM_HOST, port: Number(process.env.SIM_PORT ?? 0) });
  await seedSampleCluster(sim);
  const kubeconfig = process.argv[2] ? resolve(process.argv[2]) : join(await mkdtemp(join(tmpdir(), 'proxyout-sim-')), 'kubeconfig');
  await sim.writeKubeconfig(kubeconfig);
  process.stdout.write(JSON.stringify({ server: sim.server, kubeconfig, adminToken: sim.adminToken, pid: process.pid }) + '\n');
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void sim.stop().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((e: unknown) => {
  process.stderr.write(`sim: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
