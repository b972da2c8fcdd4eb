// The cluster cache after what real API servers do every day: compact their history (bookmarks
// only about once a minute, so a quiet watch's resourceVersion falls behind), end every watch at
// once (a restart, a load balancer), restart with their watch history lost. Each watch must
// recover on its own — a 410 relists that watch, once, and no other — and a Service created
// meanwhile must be reachable within 2 s of the server answering again. Real CLI, real curl,
// the simulated cluster with its default one-minute bookmarks.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';

let cluster: TestCluster;
let proxy: ProxyProcess;
before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--connect-timeout', '2s']);
});
after(async () => {
  cluster.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster.close();
});

/** Milliseconds from `since` until the Service answers through the proxy (curl every 100 ms), or fails after `limitMs`. */
async function reachableAfter(name: string, since: number, limitMs: number): Promise<number> {
  let last = '';
  while (Date.now() - since < limitMs + 3000) {
    const r = await curl(['-sS', '--max-time', '2', '-x', `socks5h://${proxy.socks}`, `http://${name}.shop/`]);
    if (r.code === 0 && r.stdout.includes(`(shop)`)) return Date.now() - since;
    last = r.stderr.trim();
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`${name}.shop not reachable ${limitMs + 3000} ms after the server was back: ${last}`);
}

async function addService(name: string): Promise<void> {
  const sim = cluster.sim;
  await sim.createPod({ namespace: 'shop', name: `${name}-1`, labels: { app: name }, ports: [{ containerPort: 8080, backend: 'http' }] });
  await sim.createService({ namespace: 'shop', name, selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
}

test('after a compaction and every watch ended, each watch relists once and a new Service is reachable within 2 s', async () => {
  const sim = cluster.sim;
  // A pod outside every Service: the resourceVersion moves on while no watched object changes.
  await sim.createPod({ namespace: 'shop', name: 'lonely', labels: { app: 'lonely' }, ports: [{ containerPort: 9000, backend: 'http' }] });
  const from = sim.listWatchLog.length;
  const compactedAt = Number(sim.resourceVersion);
  sim.compact();
  sim.dropWatches();
  const since = Date.now();
  await addService('after-compaction');
  const ms = await reachableAfter('after-compaction', since, 2000);
  assert.ok(ms <= 2000, `reachable ${ms} ms after the compaction (target ≤ 2000)`);

  // Let every watch settle, then read what was asked of the server.
  await new Promise((r) => setTimeout(r, 1500));
  const log = sim.listWatchLog.slice(from);
  const paths = [...new Set(log.map((e) => e.path))];
  assert.ok(paths.includes('/apis/networking.k8s.io/v1/ingresses'), `the Ingress watch resumed too: ${paths.join(', ')}`);
  for (const path of paths) {
    const mine = log.filter((e) => e.path === path);
    const relists = mine.filter((e) => e.verb === 'list' || e.watchList).length;
    // Resumed once from its old resourceVersion (410), listed once, then watching from the new one.
    const stale = mine.filter((e) => e.verb === 'watch' && !e.watchList && e.resourceVersion !== undefined && Number(e.resourceVersion) < compactedAt);
    assert.ok(relists === 1, `${path}: ${relists} relists (${JSON.stringify(mine)})`);
    assert.ok(stale.length <= 1, `${path}: resumed ${stale.length} times from a compacted resourceVersion`);
  }
});

test('after an API server restart with its history lost (2 s down), a Service created meanwhile is reachable within 2 s of its return', async () => {
  const sim = cluster.sim;
  let back!: () => void;
  const downFor = new Promise<void>((r) => (back = r));
  const restarting = sim.restartApiServer(downFor);
  await new Promise((r) => setTimeout(r, 300));
  await addService('after-restart');
  await new Promise((r) => setTimeout(r, 1700));
  back();
  await restarting;
  const since = Date.now();
  const ms = await reachableAfter('after-restart', since, 2000);
  assert.ok(ms <= 2000, `reachable ${ms} ms after the API server was back (target ≤ 2000)`);
});

test('API server back with its watch caches still filling (429 with Retry-After): a new Service is reachable within 2 s of them ready', async () => {
  // On a big cluster upstream's watch caches take seconds to fill after a restart; meanwhile every
  // watch gets 429 "storage is (re)initializing" and the proxy must wait as asked, not give up.
  const sim = cluster.sim;
  const from = sim.listWatchLog.length;
  const restarting = sim.restartApiServer(300, { initialisingMs: 2500 });
  await addService('while-initialising');
  await restarting;
  const readyAt = Date.now() + 2500;
  const ms = await reachableAfter('while-initialising', readyAt, 2000);
  assert.ok(ms <= 2000, `reachable ${ms} ms after the watch caches were ready (target ≤ 2000)`);
  const watchesWhileFilling = sim.listWatchLog.slice(from).filter((e) => e.verb === 'watch' && e.at < readyAt);
  assert.ok(watchesWhileFilling.length > 0, 'the watches met the filling caches (each refused 429 there)');
  assert.equal(proxy.proc.exitCode, null, 'the proxy keeps serving');
});

test('with a bookmark past the last change, a compaction costs no relist: each watch resumes from its bookmark', async () => {
  // Bookmarks every 200 ms keep each watch's resourceVersion current: a compaction then costs no relist at all.
  const sim = cluster.sim;
  sim.setBookmarkInterval(200);
  try {
    sim.dropWatches(); // the watches that follow get the short interval
    await new Promise((r) => setTimeout(r, 800));
    await sim.createPod({ namespace: 'shop', name: 'lonely-2', labels: { app: 'lonely' }, ports: [{ containerPort: 9000, backend: 'http' }] });
    await new Promise((r) => setTimeout(r, 600)); // a bookmark past the pod reaches every watch
    const from = sim.listWatchLog.length;
    sim.compact();
    sim.dropWatches();
    const since = Date.now();
    await addService('after-bookmarks');
    await reachableAfter('after-bookmarks', since, 2000);
    await new Promise((r) => setTimeout(r, 500));
    const relists = sim.listWatchLog.slice(from).filter((e) => e.verb === 'list' || e.watchList);
    assert.deepEqual(relists, [], 'resumed from the bookmarks: nothing listed again');
  } finally {
    sim.setBookmarkInterval(60_000);
  }
});
