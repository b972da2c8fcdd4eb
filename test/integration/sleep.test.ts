// A laptop that sleeps: the proxy is frozen (SIGSTOP) while the cluster moves on — pods replaced,
// history compacted, watches ended, a Service created — and then, the harder case, wakes behind a
// NAT that forgot every connection: each watch and tunnel open before is silently dead. From the
// moment it runs again (SIGCONT): no client request fails because of a tunnel, watch or pod that
// went away meanwhile, and the Service created during the sleep answers within 5 s. The freeze
// is 7 s (the proxy takes any tick 5 s late as a pause); a real sleep is longer, not different.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { SAMPLE } from '../sim/sample.js';

let cluster: TestCluster;
let proxy: ProxyProcess;
before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--connect-timeout', '10s', '--log-level', 'debug']);
});
after(async () => {
  proxy?.proc.kill('SIGCONT');
  cluster.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster.close();
});

const get = (url: string) => curl(['-sS', '--max-time', '12', '-x', `socks5h://${proxy.socks}`, url]);

/** Requests one after another for `ms`: every failure with its message, and when `url` first answered. */
async function requestsFor(ms: number, urls: string[], watched: string): Promise<{ failures: string[]; firstOk?: number; total: number }> {
  const start = Date.now();
  const failures: string[] = [];
  let firstOk: number | undefined;
  let total = 0;
  while (Date.now() - start < ms) {
    const results = await Promise.all(urls.map(async (url) => [url, await get(url)] as const));
    for (const [url, r] of results) {
      total++;
      if (r.code !== 0 || !/hello from/.test(r.stdout)) failures.push(`${url} at +${Date.now() - start} ms: ${r.stderr.trim() || r.stdout.slice(0, 100)}`);
      else if (url === watched && firstOk === undefined) firstOk = Date.now() - start;
    }
  }
  return { failures, firstOk, total };
}

/** Replaces every web pod (a rollout while the laptop slept): new names, new IPs, the old ones gone. */
async function replaceWebPods(suffix: string): Promise<void> {
  const sim = cluster.sim;
  const web = SAMPLE.web;
  const current = (await import('../helpers/cluster.js')).apiGet(sim, `/api/v1/namespaces/shop/pods?labelSelector=app%3Dweb`);
  for (const pod of (await current).items as Array<{ metadata: { name: string } }>) await sim.deletePod('shop', pod.metadata.name);
  for (let i = 0; i < 2; i++) {
    await sim.createPod({
      namespace: 'shop',
      name: `web-${suffix}-${i}`,
      labels: { app: 'web' },
      ports: [{ name: 'http', containerPort: web.containerPort, backend: 'http' }],
    });
  }
}

async function addService(name: string): Promise<void> {
  await cluster.sim.createPod({ namespace: 'shop', name: `${name}-1`, labels: { app: name }, ports: [{ containerPort: 8080, backend: 'http' }] });
  await cluster.sim.createService({ namespace: 'shop', name, selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
}

const FREEZE_MS = 7_000;

test('asleep while the cluster moved on (pods replaced, history compacted, watches ended): no request fails after waking', async () => {
  const sim = cluster.sim;
  for (const url of ['http://web.shop:8080/', 'http://api.shop/']) assert.match((await get(url)).stdout, /hello from/);
  proxy.proc.kill('SIGSTOP');
  await new Promise((r) => setTimeout(r, 500));
  await replaceWebPods('a');
  await addService('slept-a');
  sim.compact();
  sim.dropWatches();
  await new Promise((r) => setTimeout(r, FREEZE_MS));
  proxy.proc.kill('SIGCONT');
  const r = await requestsFor(5_000, ['http://web.shop:8080/', 'http://api.shop/', 'http://slept-a.shop/'], 'http://slept-a.shop/');
  assert.deepEqual(r.failures, [], `${r.failures.length} of ${r.total} requests failed after waking`);
  assert.ok(r.firstOk !== undefined && r.firstOk <= 5_000, `the Service created during the sleep answered at +${r.firstOk} ms`);
  assert.ok(proxy.logs.some((l) => l.msg === 'the process did not run for a while (sleep?); checking watches and tunnels'));
});

test('woken behind a NAT that forgot every connection (watches and tunnels silently dead): no request fails, no dead tunnel is used', async () => {
  const sim = cluster.sim;
  for (const url of ['http://web.shop:8080/', 'http://api.shop/']) assert.match((await get(url)).stdout, /hello from/);
  proxy.proc.kill('SIGSTOP');
  await new Promise((r) => setTimeout(r, 500));
  // Nothing is reset and nothing answers on what was open; new connections work.
  const frozenWatches = sim.freezeWatches();
  const frozenSessions = sim.freezeSpdySessions();
  assert.ok(frozenWatches > 0 && frozenSessions > 0, `${frozenWatches} watches, ${frozenSessions} tunnels frozen`);
  await replaceWebPods('b');
  await addService('slept-b');
  await new Promise((r) => setTimeout(r, FREEZE_MS));
  proxy.proc.kill('SIGCONT');
  const woke = proxy.logs.length;
  const r = await requestsFor(5_000, ['http://web.shop:8080/', 'http://api.shop/', 'http://slept-b.shop/'], 'http://slept-b.shop/');
  // On failure, what the proxy did after waking says which part did not recover.
  const since = () =>
    proxy.logs
      .slice(woke)
      .map((l) => JSON.stringify(l))
      .join('\n');
  assert.deepEqual(r.failures, [], `${r.failures.length} of ${r.total} requests failed after waking; the proxy's log since:\n${since()}`);
  assert.ok(r.firstOk !== undefined && r.firstOk <= 5_000, `the Service created during the sleep answered at +${r.firstOk} ms`);
});
