// Learnt ingress hosts in the routing table of the real CLI, with two simulated clusters that each
// run the sample ingress controller: Ingresses that come and go while a reload is being checked
// reach the table in force at once and the table swapped in.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import vm from 'node:vm';
import { startClusters, type MultiCluster } from '../helpers/multi-cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { eventually } from '../helpers/cluster.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { seedIngressCluster } from '../sim/ingress-sample.js';

let multi: MultiCluster;
let configFile: string;

const config = (routes: string[]) => `direct: false
routes:
${routes.map((name, i) => `  - { name: ${name}, kind: cluster, context: ${name}${i === 0 ? ', default: true' : ''} }\n`).join('')}`;

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  for (const c of multi.clusters) await seedIngressCluster(c.sim);
  configFile = path.join(multi.dir, 'config.yaml');
});

after(async () => {
  await multi?.close();
});

async function startProxy(routes: string[]): Promise<ProxyProcess> {
  await writeFile(configFile, config(routes));
  return startProxyProcess(['--kubeconfig', multi.kubeconfig, '--config', configFile, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0', '--log-level', 'debug']);
}

/** The SOCKS reply for host:80 (0: opened, through the cluster's ingress controller; 2: refused). */
async function reply(proxy: ProxyProcess, host: string): Promise<number> {
  const { reply: code, socket } = await socks5Connect(proxy.socks!, host, 80);
  socket.destroy();
  return code;
}

/** What the ingress controller answers for http://host/ through the proxy. */
async function viaIngress(proxy: ProxyProcess, host: string): Promise<string> {
  const r = await curl(['--proxy', `socks5h://${proxy.socks}`, `http://${host}/`]);
  assert.equal(r.code, 0, `${host}: ${r.stderr}`);
  return r.stdout;
}

/** FindProxyForURL of the PAC file the proxy serves now. */
async function pacFile(proxy: ProxyProcess): Promise<(host: string) => string> {
  const r = await curl(['-s', `http://${proxy.http}/proxy.pac`]);
  assert.equal(r.code, 0, r.stderr);
  const sandbox: Record<string, unknown> = {};
  vm.runInNewContext(r.stdout, sandbox);
  return (host) => (sandbox.FindProxyForURL as (u: string, h: string) => string)(`http://${host}/`, host);
}

const tableReloaded = (proxy: ProxyProcess, mark: number) => proxy.logs.slice(mark).some((l) => l.msg === 'routing table reloaded');

test('Ingresses added and deleted while a reload is checked: the table in force has them at once, and so has the table swapped in', async () => {
  const [prod, staging] = multi.clusters;
  const proxy = await startProxy(['prod']);
  try {
    const viaProxy = `SOCKS5 ${proxy.socks}; PROXY ${proxy.http}`;
    await prod!.sim.createIngress({ namespace: 'shop', name: 'leaving', rules: [{ host: 'leaving.prod.sim.test', paths: [{ service: 'web', port: 8080 }] }] });
    await eventually(async () => (await reply(proxy, 'leaving.prod.sim.test')) === 0);

    // The reload adds staging, whose first sync cannot finish while its watch-lists end at once
    // and its LISTs get no answer: the reload is held until that is turned off.
    staging!.sim.endWatchesAtOnce(true);
    staging!.sim.stallLists(true);
    let held = true;
    try {
      staging!.sim.resetCounters();
      await writeFile(configFile, config(['prod', 'staging']));
      const mark = proxy.logs.length;
      proxy.proc.kill('SIGHUP');
      await eventually(async () => staging!.sim.counters.list >= 1, 10_000, 20);

      await prod!.sim.createIngress({ namespace: 'shop', name: 'arriving', rules: [{ host: 'arriving.prod.sim.test', paths: [{ service: 'web', port: 8080 }] }] });
      prod!.sim.deleteIngress('shop', 'leaving');
      // Well inside the 30 s a reload waits for a new cluster's sync.
      await eventually(async () => (await reply(proxy, 'arriving.prod.sim.test')) === 0 && (await reply(proxy, 'leaving.prod.sim.test')) === 2, 10_000, 100);
      assert.match(await viaIngress(proxy, 'arriving.prod.sim.test'), /^ingress arriving\.prod\.sim\.test \/ -> shop\/web:8080/);
      const pac = await pacFile(proxy);
      assert.equal(pac('arriving.prod.sim.test'), viaProxy);
      assert.equal(pac('leaving.prod.sim.test'), 'DIRECT');
      assert.equal(tableReloaded(proxy, mark), false, 'all this while the reload was held');

      staging!.sim.endWatchesAtOnce(false);
      staging!.sim.stallLists(false);
      held = false;
      await eventually(async () => tableReloaded(proxy, mark), 20_000, 20);
    } finally {
      if (held) {
        staging!.sim.endWatchesAtOnce(false);
        staging!.sim.stallLists(false);
      }
    }
    // At once after the swap (no watch event or resync since): the new table has both changes.
    assert.equal(await reply(proxy, 'leaving.prod.sim.test'), 2);
    assert.match(await viaIngress(proxy, 'arriving.prod.sim.test'), /^ingress arriving\.prod\.sim\.test \/ -> shop\/web:8080/);
    const pac = await pacFile(proxy);
    assert.equal(pac('arriving.prod.sim.test'), viaProxy);
    assert.equal(pac('leaving.prod.sim.test'), 'DIRECT');
    // And it goes on learning: prod's route was kept across the reload, staging's is new.
    await prod!.sim.createIngress({ namespace: 'shop', name: 'later', rules: [{ host: 'later.prod.sim.test', paths: [{ service: 'web', port: 8080 }] }] });
    await staging!.sim.createIngress({ namespace: 'shop', name: 'later', rules: [{ host: 'later.staging.sim.test', paths: [{ service: 'web', port: 8080 }] }] });
    await eventually(async () => (await reply(proxy, 'later.prod.sim.test')) === 0 && (await reply(proxy, 'later.staging.sim.test')) === 0, 10_000, 100);
  } finally {
    assert.equal(await proxy.stop(), 0);
  }
});
