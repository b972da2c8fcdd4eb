// A proxy started against a server that refuses watch-lists (the WatchList gate off, a control
// plane older than 1.27) lists in pages; once that control plane is upgraded (or the gate turned
// on) under the running proxy, its relists use the watch-list again, after the refusal is old
// enough (10 min; here PROXYOUT_TEST_RELEARN_WATCH_LIST_MS). A relist is forced as a restart
// forces it: etcd compacted, every watch ended.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';

const RELEARN_MS = 300;
let cluster: TestCluster;
let proxy: ProxyProcess | undefined;

before(async () => {
  cluster = await startTestCluster();
  cluster.sim.setWatchList(false);
  const env = { PROXYOUT_TEST_RELEARN_WATCH_LIST_MS: String(RELEARN_MS) };
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug'], { env });
});

after(async () => {
  cluster.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster.close();
});

/** Compacts, ends every watch, and waits until a Service created then answers; the relists that took. */
async function relist(name: string): Promise<Array<{ verb: string; path: string; watchList: boolean }>> {
  const sim = cluster.sim;
  // A pod outside every Service: the resourceVersion moves past what the watches saw, so they relist.
  await sim.createPod({ namespace: 'shop', name: `${name}-lonely`, labels: { app: `${name}-lonely` }, ports: [{ containerPort: 9000, backend: 'http' }] });
  const from = sim.listWatchLog.length;
  sim.compact();
  sim.dropWatches();
  await sim.createPod({ namespace: 'shop', name: `${name}-1`, labels: { app: name }, ports: [{ containerPort: 8080, backend: 'http' }] });
  await sim.createService({ namespace: 'shop', name, selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
  for (const deadline = Date.now() + 10_000; ; await delay(100)) {
    const r = await curl(['--max-time', '2', '-x', `socks5h://${proxy!.socks}`, `http://${name}.shop/`]);
    if (r.code === 0) break;
    if (Date.now() > deadline) throw new Error(`${name}.shop not reachable: ${r.stderr}`);
  }
  await delay(500);
  return sim.listWatchLog.slice(from).filter((e) => e.verb === 'list' || e.watchList);
}

test('watch-lists refused at start, then offered: relists use them again once the refusal is old enough', async () => {
  const paged = await relist('while-refused');
  assert.ok(paged.length > 0 && paged.every((e) => e.verb === 'list' || !e.watchList), `paged relists: ${JSON.stringify(paged)}`);
  cluster.sim.setWatchList(true);
  await delay(RELEARN_MS * 2);
  const relists = await relist('after-upgrade');
  assert.ok(relists.length > 0, 'relisted');
  assert.deepEqual(
    relists.filter((e) => e.verb === 'list'),
    [],
    `every relist by watch-list: ${JSON.stringify(relists)}`,
  );
});
