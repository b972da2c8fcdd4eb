// Two real control planes in one routing table (test/helpers/real-cluster.ts): an up-to-date one
// ("new") and one with the PortForwardWebsockets and WatchList gates off behind a kubelet that
// does not tunnel ("old"), each its own kube-apiserver v1.37.2, etcd, controllers and node. One
// proxy serves both by route suffix, each route with its own transport (SPDY tunnel for new,
// one WebSocket per stream for old, learnt per cluster) and its own cache; a name only one cluster
// has is refused on the other. Real kubectl, real curl, the real CLI. Skips with a reason when the
// test bed is not built (fails instead under PROXYOUT_REQUIRE_REAL_CLUSTER=1).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import yaml from 'js-yaml';
import { skipUnlessRealCluster, startRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { manifests, webDeployment, webService } from '../helpers/real-cluster-objects.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { applyAndRollOut } from '../helpers/real-cluster-setup.js';
import { curl } from '../helpers/curl.js';
import { eventually } from '../helpers/cluster.js';
import { socks5Connect } from '../helpers/socks-client.js';

const skip = skipUnlessRealCluster();

const objects = (only: string) => manifests(webDeployment(1), webService(), webService(only));

type Kubeconfig = {
  clusters: Array<{ name: string; cluster: unknown }>;
  users: Array<{ name: string; user: unknown }>;
  contexts: Array<{ name: string; context: Record<string, unknown> }>;
};

const clusters: Record<'new' | 'old', RealCluster | undefined> = { new: undefined, old: undefined };
let proxy: ProxyProcess | undefined;

before(async () => {
  if (skip) return;
  [clusters.new, clusters.old] = await Promise.all([
    startRealCluster(),
    startRealCluster({ apiServerFlags: ['--feature-gates=PortForwardWebsockets=false,WatchList=false'], nodeFlags: ['--websocket-tunnel=false'] }),
  ]);
  await Promise.all((['new', 'old'] as const).map((n) => applyAndRollOut(clusters[n]!, objects(`only-${n}`), ['deployment/web'])));
  // One kubeconfig with a context per cluster (as kubectl config view --flatten of both would be).
  const merged: Kubeconfig = { clusters: [], users: [], contexts: [] };
  for (const name of ['new', 'old'] as const) {
    const doc = yaml.load(await readFile(clusters[name]!.kubeconfig, 'utf8')) as Kubeconfig;
    const admin = doc.contexts.find((x) => x.name === 'admin')!.context;
    merged.clusters.push({ name, cluster: doc.clusters.find((x) => x.name === admin.cluster)!.cluster });
    merged.users.push({ name, user: doc.users.find((x) => x.name === admin.user)!.user });
    merged.contexts.push({ name, context: { cluster: name, user: name, namespace: 'shop' } });
  }
  const kubeconfig = path.join(clusters.new!.dir, 'kubeconfig-both');
  await writeFile(kubeconfig, yaml.dump({ apiVersion: 'v1', kind: 'Config', ...merged, 'current-context': 'new' }), { mode: 0o600 });
  proxy = await startProxyProcess([
    '--kubeconfig',
    kubeconfig,
    '--context',
    'new',
    '--context',
    'old',
    '--listen-socks',
    '127.0.0.1:0',
    '--log-level',
    'debug',
  ]);
});

after(async () => {
  const code = await proxy?.stop();
  await Promise.all([clusters.new?.stop(), clusters.old?.stop()]);
  if (code !== undefined) assert.equal(code, 0);
});

const get = (url: string) => curl(['-sS', '--max-time', '10', '--proxy', `socks5h://${proxy!.socks}`, url]);

/** The proxy's last warnings and debug lines about failures, for a failed assertion's message. */
const recentTrouble = () =>
  proxy!.logs
    .filter((l) => Number(l.level) >= 40 || /fail|refused/i.test(String(l.msg)))
    .slice(-8)
    .map((l) => JSON.stringify(l))
    .join('\n');

describe('two real clusters in one routing table', { skip }, () => {
  test('each route answers its own names, with its own transport', async () => {
    for (const route of ['new', 'old']) {
      for (const url of [`http://web.shop.${route}/`, `http://only-${route}.shop.${route}/`, `http://web.shop.svc.${route}/`]) {
        const r = await get(url);
        assert.equal(r.code, 0, `${url}: ${r.stderr}\n${recentTrouble()}`);
        assert.match(r.stdout, /^pod=web-\S+ namespace=shop port=8080$/m, url);
      }
    }
    // The default route (the first context) takes the cluster-local forms.
    assert.match((await get('http://only-new.shop.svc.cluster.local/')).stdout, /^pod=web-/m);
    // Only the old cluster taught the proxy to use a WebSocket per stream.
    const learned = proxy!.logs.filter((l) => String(l.msg).startsWith('the API server does not offer the SPDY port-forward tunnel'));
    assert.deepEqual(
      learned.map((l) => l.cluster),
      ['old'],
    );
  });

  test('a name only one cluster has is refused on the other route, naming it', async () => {
    const { reply, socket } = await socks5Connect(proxy!.socks!, 'only-new.shop.old', 80);
    socket.destroy();
    assert.equal(reply, 0x04);
    const failed = await eventually(
      async () => proxy!.logs.find((l) => String(l.msg).startsWith('stream failed') && l.target === 'only-new.shop.old:80'),
      3_000,
      50,
    );
    assert.match(String(failed.msg), /cluster route old/);
    assert.match(String(failed.msg), /only-new/);
  });
});
