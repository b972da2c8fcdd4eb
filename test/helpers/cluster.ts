import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SimCluster } from '../sim/cluster.js';
import { seedSampleCluster } from '../sim/sample.js';

export interface TestCluster {
  sim: SimCluster;
  dir: string;
  kubeconfig: string;
  close(): Promise<void>;
}

/** A seeded simulated cluster plus a kubeconfig for it (namespace "shop") in a private temp dir. */
export async function startTestCluster(opts: { namespace?: string } = {}): Promise<TestCluster> {
  const sim = await SimCluster.start({ quiet: true });
  await seedSampleCluster(sim);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-test-'));
  const kubeconfig = path.join(dir, 'kubeconfig');
  await sim.writeKubeconfig(kubeconfig, { namespace: opts.namespace ?? 'shop' });
  return {
    sim,
    dir,
    kubeconfig,
    async close() {
      await sim.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Reads an object straight from the simulated API server (as an admin). */
export function apiGet<T = any>(sim: SimCluster, apiPath: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const req = https.request(`${sim.server}${apiPath}`, { ca: sim.caPem, headers: { Authorization: `Bearer ${sim.adminToken}` } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(body) as T) : reject(new Error(`${res.statusCode} ${body}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Polls until fn returns a truthy value or the time is up (for eventually-consistent checks). */
export async function eventually<T>(fn: () => Promise<T | undefined | false>, timeoutMs = 10_000, stepMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** A kubeconfig for this cluster whose server is a loopback port where nothing listens. */
export async function unreachableKubeconfig(cluster: TestCluster): Promise<string> {
  const closed = net.createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const port = (closed.address() as net.AddressInfo).port;
  await new Promise((r) => closed.close(r));
  const file = path.join(cluster.dir, `unreachable-${port}`);
  await writeFile(file, cluster.sim.kubeconfigYaml({ server: `https://127.0.0.1:${port}` }), { mode: 0o600 });
  return file;
}
