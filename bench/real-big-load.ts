// The workload of `npm run bench:real-big` (bench/real-big-cluster.ts): Deployments behind
// Services on the real control plane, so that the ReplicaSet controller makes the pods, the
// scheduler places them on the stand-in nodes and the EndpointSlice controller writes real
// slices. Each block of 1,000 pods is a mix of small and large apps: 150 Deployments of 2
// replicas, 30 of 10, 2 of 150 (two slices each: 100 endpoints a slice) and 1 of 100.
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import type { RealCluster } from '../test/helpers/real-cluster.js';

export const NAMESPACES = 10;
const BLOCK: Array<{ count: number; replicas: number }> = [
  { count: 150, replicas: 2 },
  { count: 30, replicas: 10 },
  { count: 2, replicas: 150 },
  { count: 1, replicas: 100 },
];
export const PODS_PER_BLOCK = BLOCK.reduce((n, b) => n + b.count * b.replicas, 0);
export const SERVICES_PER_BLOCK = BLOCK.reduce((n, b) => n + b.count, 0);
/** The one app whose pods serve HTTP: a request through the proxy checks it forwards at every size. */
export const HTTP_APP = { namespace: 'team-0', name: 'app-0-0' };

interface App {
  namespace: string;
  name: string;
  replicas: number;
  image: string;
}

function appsOfBlock(block: number): App[] {
  const apps: App[] = [];
  for (const [kind, b] of BLOCK.entries()) {
    for (let i = 0; i < b.count; i++) {
      const name = `app-${block}-${kind === 0 ? i : `${kind}x${i}`}`;
      const namespace = `team-${apps.length % NAMESPACES}`;
      // Pods of proxyout/none open no server on the stand-in (nothing listens): thousands stay cheap.
      const image = namespace === HTTP_APP.namespace && name === HTTP_APP.name ? 'proxyout/http' : 'proxyout/none';
      apps.push({ namespace, name, replicas: b.replicas, image });
    }
  }
  return apps;
}

/** A Deployment as a team would write it: probes, resources, env (the stand-in ignores what it does not serve). */
function deployment(a: App): unknown {
  const labels = { app: a.name, tier: 'backend', team: a.namespace };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: a.name, namespace: a.namespace, labels },
    spec: {
      replicas: a.replicas,
      selector: { matchLabels: { app: a.name } },
      template: {
        metadata: { labels, annotations: { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9090' } },
        spec: {
          terminationGracePeriodSeconds: 5,
          containers: [
            {
              name: 'app',
              image: `${a.image}:1.4.2`,
              ports: [
                { name: 'http', containerPort: 8080 },
                { name: 'metrics', containerPort: 9090 },
              ],
              env: [
                { name: 'APP_NAME', value: a.name },
                { name: 'LOG_LEVEL', value: 'info' },
                { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
              ],
              resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { memory: '128Mi' } },
              readinessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 10 },
              livenessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 20 },
            },
          ],
        },
      },
    },
  };
}

function service(a: App): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: a.name, namespace: a.namespace, labels: { app: a.name } },
    spec: {
      selector: { app: a.name },
      ports: [
        { name: 'http', port: 80, targetPort: 'http' },
        { name: 'metrics', port: 9090, targetPort: 'metrics' },
      ],
    },
  };
}

/** Runs fn over items, `width` at a time. */
async function pool<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

async function create(cluster: RealCluster, path: string, body: unknown): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const r = await cluster.request('POST', path, body).catch((err: unknown) => ({ status: 0, body: String(err) }));
    if (r.status === 201 || r.status === 409) return;
    // 429 and 5xx are the server asking for patience; anything else is a bench bug.
    if ((r.status !== 429 && r.status < 500 && r.status !== 0) || attempt === 5) throw new Error(`POST ${path}: ${r.status} ${r.body.slice(0, 300)}`);
    await delay(500 * attempt);
  }
}

export async function createNamespaces(cluster: RealCluster): Promise<void> {
  for (let i = 0; i < NAMESPACES; i++) await create(cluster, '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: `team-${i}` } });
}

/** Creates blocks [from, to): their Services, then their Deployments. */
export async function createBlocks(cluster: RealCluster, from: number, to: number): Promise<void> {
  const apps: App[] = [];
  for (let b = from; b < to; b++) apps.push(...appsOfBlock(b));
  await pool(apps, 8, (a) => create(cluster, `/api/v1/namespaces/${a.namespace}/services`, service(a)));
  await pool(apps, 8, (a) => create(cluster, `/apis/apps/v1/namespaces/${a.namespace}/deployments`, deployment(a)));
}

export interface Progress {
  readyPods: number;
  endpoints: number;
  slices: number;
}

type DeploymentList = { items: Array<{ status?: { readyReplicas?: number } }>; metadata: { continue?: string } };
type SliceList = { items: Array<{ endpoints?: Array<{ conditions?: { ready?: boolean } }> | null }>; metadata: { continue?: string } };

/** Every page of a cluster-wide list (500 a page, as client-go's pager). */
async function listAll<L extends { items: unknown[]; metadata: { continue?: string } }>(cluster: RealCluster, path: string): Promise<L['items']> {
  const items: L['items'] = [];
  let token: string | undefined;
  do {
    const page = await cluster.get<L>(`${path}?limit=500${token ? `&continue=${encodeURIComponent(token)}` : ''}`);
    items.push(...page.items);
    token = page.metadata.continue || undefined;
  } while (token);
  return items;
}

export async function progress(cluster: RealCluster): Promise<Progress> {
  const deployments = await listAll<DeploymentList>(cluster, '/apis/apps/v1/deployments');
  const slices = await listAll<SliceList>(cluster, '/apis/discovery.k8s.io/v1/endpointslices');
  return {
    readyPods: deployments.reduce((n, d) => n + (d.status?.readyReplicas ?? 0), 0),
    endpoints: slices.reduce((n, s) => n + (s.endpoints ?? []).filter((e) => e.conditions?.ready).length, 0),
    slices: slices.length,
  };
}

/**
 * Waits until the Deployments report `pods` ready replicas and the EndpointSlices hold as many
 * ready endpoints (the "kubernetes" Service has none here); throws with how far it got.
 */
/** The machine's MemAvailable, bytes. */
export function memAvailable(): number {
  return Number(/MemAvailable:\s+(\d+) kB/.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? NaN) * 1024;
}

/** Below this much available memory the bench stops growing the cluster (the machine is shared). */
const MEMORY_FLOOR = Number(process.env.BENCH_REAL_BIG_MEMORY_FLOOR_GIB ?? 3) * 2 ** 30;

export async function waitForPods(cluster: RealCluster, pods: number, timeoutMs: number, log: (line: string) => void): Promise<Progress> {
  const started = Date.now();
  let last: Progress = { readyPods: 0, endpoints: 0, slices: 0 };
  let lastLog = 0;
  for (;;) {
    cluster.assertHealthy();
    last = await progress(cluster);
    if (last.readyPods >= pods && last.endpoints >= pods) return last;
    if (Date.now() - lastLog > 15_000) {
      log(
        `${Math.round((Date.now() - started) / 1000)} s: ${last.readyPods} of ${pods} pods ready, ${last.endpoints} ready endpoints in ${last.slices} EndpointSlices`,
      );
      lastLog = Date.now();
    }
    if (memAvailable() < MEMORY_FLOOR)
      throw new Error(
        `the machine's available memory fell to ${(memAvailable() / 2 ** 30).toFixed(1)} GiB (floor ${MEMORY_FLOOR / 2 ** 30} GiB) at ${last.readyPods} of ${pods} pods ready`,
      );
    if (Date.now() - started > timeoutMs)
      throw new Error(
        `${pods} pods not ready within ${timeoutMs / 1000} s: ${last.readyPods} pods ready, ${last.endpoints} ready endpoints in ${last.slices} EndpointSlices`,
      );
    await delay(3_000);
  }
}
