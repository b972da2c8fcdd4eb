// Several simulated clusters at once, each with the sample objects, and one kubeconfig holding a
// context per cluster (as `kubectl config view --flatten` of merged files would). Their ClusterIP
// and Pod IP ranges overlap by design (the same /16s), with different starting points, so that
// most addresses are unique but the `kubernetes` Service's 127.96.0.1 is in every cluster.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { SimCluster } from '../sim/cluster.js';
import { seedSampleCluster } from '../sim/sample.js';

export interface NamedCluster {
  context: string;
  sim: SimCluster;
}

export interface MultiCluster {
  clusters: NamedCluster[];
  dir: string;
  kubeconfig: string;
  /** Rewrites the kubeconfig with these contexts pointed elsewhere (e.g. an unreachable server). */
  writeKubeconfig(overrides?: Record<string, { server: string }>): Promise<void>;
  close(): Promise<void>;
}

type KubeconfigDoc = { clusters: unknown[]; contexts: unknown[]; users: unknown[]; 'current-context'?: string };

export async function startClusters(contexts: string[], namespace = 'shop'): Promise<MultiCluster> {
  const clusters: NamedCluster[] = [];
  for (const [i, context] of contexts.entries()) {
    const sim = await SimCluster.start({ quiet: true, podIpStart: `127.1${i}.0.2`, clusterIpStart: `127.96.${i}.10` });
    await seedSampleCluster(sim);
    clusters.push({ context, sim });
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-multi-'));
  const kubeconfig = path.join(dir, 'kubeconfig');
  const writeKubeconfig = async (overrides: Record<string, { server: string }> = {}) => {
    const merged: KubeconfigDoc = { clusters: [], contexts: [], users: [] };
    for (const c of clusters) {
      const doc = yaml.load(c.sim.kubeconfigYaml({ context: c.context, namespace, server: overrides[c.context]?.server })) as KubeconfigDoc;
      merged.clusters.push(...doc.clusters);
      merged.contexts.push(...doc.contexts);
      merged.users.push(...doc.users);
    }
    const text = yaml.dump({ apiVersion: 'v1', kind: 'Config', ...merged, 'current-context': clusters[0]!.context });
    await writeFile(kubeconfig, text, { mode: 0o600 });
  };
  await writeKubeconfig();
  return {
    clusters,
    dir,
    kubeconfig,
    writeKubeconfig,
    async close() {
      for (const c of clusters) await c.sim.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A Service "which" with one http pod named `which-<context>`, so a response tells the clusters apart. */
export async function addWhich(c: NamedCluster, namespace = 'shop'): Promise<{ clusterIP: string; podIP: string }> {
  const pod = `which-${c.context}`;
  const { ip } = await c.sim.createPod({ namespace, name: pod, labels: { app: 'which' }, ports: [{ name: 'http', containerPort: 8080, backend: 'http' }] });
  const { clusterIP } = await c.sim.createService({ namespace, name: 'which', selector: { app: 'which' }, ports: [{ port: 80, targetPort: 8080 }] });
  return { clusterIP, podIP: ip };
}
