// The ingress host watcher against the simulated API server: the host set it reports as Ingresses
// and OpenShift Routes come, change and go; 403/404 turn a source off (info, once, never an
// error); watches that end, expire (410) or go silent are recovered without losing a change.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig } from '@kubernetes/client-node';
import { SimCluster } from '../sim/cluster.js';
import { seedIngressCluster, INGRESS_SAMPLE } from '../sim/ingress-sample.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { IngressHostWatcher, type IngressHostWatcherOptions } from '../../src/cluster/ingress-hosts.js';
import { createLogger } from '../../src/core/log.js';
import { eventually } from '../helpers/cluster.js';

let sim: SimCluster;

before(async () => {
  sim = await SimCluster.start({ quiet: true });
  await seedIngressCluster(sim);
});

after(async () => {
  await sim.stop();
});

interface Harness {
  watcher: IngressHostWatcher;
  reports: string[][];
  logs: Array<{ level: number; msg: string; source?: string }>;
  last(): string[] | undefined;
}

/** The watch request a started watcher opens right after its list has reached the API server. */
async function watchOpen(): Promise<void> {
  // Ingresses and IngressClasses.
  await eventually(async () => sim.counters.watch >= 2, 5_000, 20);
}

async function startWatcher(opts: { token?: string } & IngressHostWatcherOptions = {}): Promise<Harness> {
  const kc = new KubeConfig();
  kc.loadFromString(sim.kubeconfigYaml(opts.token ? { token: opts.token } : {}));
  const logs: Harness['logs'] = [];
  const log = createLogger('debug', { write: (line: string) => void logs.push(JSON.parse(line)) });
  const reports: string[][] = [];
  const watcher = new IngressHostWatcher(new ApiConnection(kc), log, (hosts) => reports.push(hosts), opts);
  sim.resetCounters();
  await watcher.start();
  return { watcher, reports, logs, last: () => reports.at(-1) };
}

const INFO = 30;
const WARN = 40;

test('reports the hosts of every Ingress at start, then each change of the set (add, update, delete, shared hosts)', async () => {
  const h = await startWatcher();
  try {
    assert.deepEqual(h.reports, [[...INGRESS_SAMPLE.hosts]], 'one report once started');
    assert.equal(h.watcher.status().sources.ingresses.state, 'synced');
    await sim.createIngress({
      namespace: 'shop',
      name: 'extra',
      tls: [{ hosts: ['tls-only.sim.test'] }],
      rules: [{ host: 'Extra.Sim.Test', paths: [{ service: 'web', port: 8080 }] }],
    });
    await eventually(async () => h.last()?.includes('extra.sim.test'));
    assert.deepEqual(h.last(), [...INGRESS_SAMPLE.hosts, 'extra.sim.test', 'tls-only.sim.test'].sort());
    sim.updateIngress({ namespace: 'shop', name: 'extra', rules: [{ host: 'renamed.sim.test', paths: [{ service: 'web', port: 8080 }] }] });
    await eventually(async () => h.last()?.includes('renamed.sim.test'));
    assert.deepEqual(h.last(), [...INGRESS_SAMPLE.hosts, 'renamed.sim.test'].sort());
    // A second Ingress naming the same host, and an update that keeps an Ingress's hosts: no change of the set, no report.
    const before = h.reports.length;
    const { secure } = INGRESS_SAMPLE;
    sim.updateIngress({
      namespace: secure.namespace,
      name: secure.name,
      tls: [{ hosts: [secure.host] }],
      rules: [{ host: secure.host, paths: [{ path: '/v2', service: secure.service, port: secure.port }] }],
    });
    await sim.createIngress({ namespace: 'default', name: 'same-host', rules: [{ host: 'renamed.sim.test', paths: [{ service: 'hello', port: 80 }] }] });
    sim.deleteIngress('shop', 'extra');
    await sim.createIngress({ namespace: 'default', name: 'marker', rules: [{ host: 'marker.sim.test' }] });
    await eventually(async () => h.last()?.includes('marker.sim.test'));
    assert.equal(h.reports.length, before + 1, 'only the marker changed the set');
    assert.ok(h.last()!.includes('renamed.sim.test'), 'still named by default/same-host');
    sim.deleteIngress('default', 'same-host');
    sim.deleteIngress('default', 'marker');
    await eventually(async () => !h.last()?.includes('renamed.sim.test') && !h.last()?.includes('marker.sim.test'));
    assert.deepEqual(h.last(), [...INGRESS_SAMPLE.hosts]);
  } finally {
    h.watcher.stop();
  }
});

test('a cluster without OpenShift Routes (404) and a user who may not list Ingresses (403): sources off, logged once at info, never an error', async () => {
  const plain = await startWatcher();
  plain.watcher.stop();
  const routes = plain.watcher.status().sources.routes;
  assert.equal(routes.state, 'off');
  assert.match(routes.reason!, /not served \(HTTP 404\)/);
  const routeLogs = plain.logs.filter((l) => l.source === 'routes');
  assert.deepEqual(
    routeLogs.map((l) => [l.level, l.msg]),
    [[INFO, 'ingress host names from this source are off']],
  );

  const scoped = await startWatcher({ token: sim.issueToken({ namespaces: ['shop'] }) });
  scoped.watcher.stop();
  assert.deepEqual(scoped.reports, [[]], 'an empty set, reported once');
  const ingresses = scoped.watcher.status().sources.ingresses;
  assert.equal(ingresses.state, 'off');
  assert.match(ingresses.reason!, /not allowed to list ingresses cluster-wide: .*forbidden/);
  assert.ok(
    scoped.logs.every((l) => l.level < WARN),
    JSON.stringify(scoped.logs),
  );
  assert.equal(scoped.logs.filter((l) => l.source === 'ingresses' && l.msg === 'ingress host names from this source are off').length, 1);
});

test('OpenShift Routes where the API serves them: their hosts join the set; openshiftRoutes: false leaves them out', async () => {
  sim.setOpenShiftRoutes(true);
  await sim.createRoute({ namespace: 'shop', name: 'console', host: 'console.apps.sim.test', service: 'web', tls: 'edge' });
  const h = await startWatcher();
  const without = await startWatcher({ openshiftRoutes: false });
  try {
    without.watcher.stop();
    assert.deepEqual(without.last(), [...INGRESS_SAMPLE.hosts]);
    assert.deepEqual(h.last(), [...INGRESS_SAMPLE.hosts, 'console.apps.sim.test'].sort());
    assert.equal(h.watcher.status().sources.routes.state, 'synced');
    await sim.createRoute({ namespace: 'default', name: 'wild', host: 'w.sub.sim.test', service: 'hello', wildcardPolicy: 'Subdomain' });
    await eventually(async () => h.last()?.includes('*.sub.sim.test'));
    assert.ok(h.last()!.includes('w.sub.sim.test'));
    sim.deleteRoute('shop', 'console');
    sim.deleteRoute('default', 'wild');
    await eventually(async () => h.last()?.join() === [...INGRESS_SAMPLE.hosts].join());
  } finally {
    h.watcher.stop();
    sim.setOpenShiftRoutes(false);
  }
});

test('a watch the server ends is resumed; one whose resourceVersion expired (410) is relisted; a change made meanwhile is not lost', async () => {
  const h = await startWatcher({ openshiftRoutes: false });
  try {
    await watchOpen();
    const listPath = '/apis/networking.k8s.io/v1/ingresses';
    sim.resetCounters();
    sim.dropWatches();
    await sim.createIngress({ namespace: 'shop', name: 'after-drop', rules: [{ host: 'after-drop.sim.test' }] });
    await eventually(async () => h.last()?.includes('after-drop.sim.test'));
    assert.equal(sim.counters.byPath[listPath] ?? 0, 1, 'resumed by a watch, no list');

    // The watch misses a change (frozen), the history is compacted, the watch ends: resuming from
    // the old resourceVersion is 410 Expired, so the watcher lists again and finds the change.
    sim.freezeWatches();
    sim.deleteIngress('shop', 'after-drop');
    await sim.createIngress({ namespace: 'shop', name: 'while-frozen', rules: [{ host: 'while-frozen.sim.test' }] });
    sim.compact();
    sim.resetCounters();
    sim.dropWatches();
    await eventually(async () => h.last()?.includes('while-frozen.sim.test'));
    assert.ok(!h.last()!.includes('after-drop.sim.test'), 'the delete missed by the frozen watch is seen through the relist');
    assert.ok((sim.counters.byPath[listPath] ?? 0) >= 1, 'relisted');
    sim.deleteIngress('shop', 'while-frozen');
    await eventually(async () => !h.last()?.includes('while-frozen.sim.test'));
  } finally {
    h.watcher.stop();
  }
});

test('a watch silent past its server-side end is cut and watched again (short deadlines)', async () => {
  const h = await startWatcher({ openshiftRoutes: false, deadlines: { watchTimeoutSeconds: 1, graceMs: 300, headersTimeoutMs: 5_000 } });
  try {
    await watchOpen();
    assert.equal(sim.freezeWatches(), 2);
    await sim.createIngress({ namespace: 'shop', name: 'after-freeze', rules: [{ host: 'after-freeze.sim.test' }] });
    await eventually(async () => h.last()?.includes('after-freeze.sim.test'), 15_000);
    assert.ok(h.logs.some((l) => l.msg === 'watch silent past its server-side end; the connection is presumed dead, watching again'));
  } finally {
    h.watcher.stop();
    if (h.last()?.includes('after-freeze.sim.test')) sim.deleteIngress('shop', 'after-freeze');
  }
});

test('an API server restart cuts the watch mid-response: the watcher survives and catches up', async () => {
  const h = await startWatcher({ openshiftRoutes: false });
  try {
    await watchOpen();
    await sim.restartApiServer(300);
    await sim.createIngress({ namespace: 'shop', name: 'after-restart', rules: [{ host: 'after-restart.sim.test' }] });
    await eventually(async () => h.last()?.includes('after-restart.sim.test'), 15_000);
    assert.equal(h.watcher.status().sources.ingresses.state, 'synced');
  } finally {
    h.watcher.stop();
    sim.deleteIngress('shop', 'after-restart');
  }
});

test('after stop() no more reports', async () => {
  const h = await startWatcher();
  h.watcher.stop();
  const n = h.reports.length;
  await sim.createIngress({ namespace: 'shop', name: 'after-stop', rules: [{ host: 'after-stop.sim.test' }] });
  // The positive control: a running watcher sees the same change.
  const control = await startWatcher();
  control.watcher.stop();
  assert.ok(control.last()!.includes('after-stop.sim.test'));
  assert.equal(h.reports.length, n);
  assert.equal(h.watcher.status().sources.ingresses.state, 'stopped');
  sim.deleteIngress('shop', 'after-stop');
});

test('stop() while start() is still listing: no report, no watch left behind', async () => {
  sim.setOpenShiftRoutes(true);
  try {
    const kc = new KubeConfig();
    kc.loadFromString(sim.kubeconfigYaml());
    const reports: string[][] = [];
    const watcher = new IngressHostWatcher(new ApiConnection(kc), createLogger('silent'), (hosts) => reports.push(hosts));
    sim.resetCounters();
    const starting = watcher.start();
    watcher.stop();
    await starting;
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(reports, []);
    assert.equal(sim.counters.watch, 0, 'no watch opened after stop');
  } finally {
    sim.setOpenShiftRoutes(false);
  }
});
