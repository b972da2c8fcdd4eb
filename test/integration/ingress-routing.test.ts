// Learnt ingress hosts in the routing table of the real CLI, with two simulated clusters that each
// run the sample ingress controller (so both learn its hosts): a host both learnt is refused by the
// proxy and sent DIRECT by its PAC file, in real Chromium too; Ingresses that come and go while a
// reload is being checked reach the table in force at once and the table swapped in.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import vm from 'node:vm';
import { startClusters, type MultiCluster } from '../helpers/multi-cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { eventually } from '../helpers/cluster.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { headlessChromium } from '../helpers/chromium.js';
import { INGRESS_SAMPLE, seedIngressCluster } from '../sim/ingress-sample.js';

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
  return startProxyProcess([
    '--kubeconfig',
    multi.kubeconfig,
    '--config',
    configFile,
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--log-level',
    'debug',
  ]);
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

const CONFLICT =
  "an ingress host is learnt from more than one cluster: the proxy refuses it and the PAC file sends it DIRECT; add it to one route's include to choose";

test('a host both clusters learnt: the proxy refuses it naming both, the PAC file sends it DIRECT (so does Chromium), one log line says so', async (t) => {
  const [, staging] = multi.clusters;
  await staging!.sim.createIngress({ namespace: 'shop', name: 'own', rules: [{ host: 'own.staging.sim.test', paths: [{ service: 'web', port: 8080 }] }] });
  const proxy = await startProxy(['prod', 'staging']);
  // Where Chromium's resolver rule sends the shared host when it goes DIRECT.
  const page = http.createServer((req, res) => res.end(`<html><body>direct to ${req.headers.host}</body></html>`)).listen(0, '127.0.0.1');
  await once(page, 'listening');
  const pagePort = (page.address() as { port: number }).port;
  try {
    const shared = INGRESS_SAMPLE.web.host;
    await eventually(async () => proxy.logs.some((l) => l.msg === CONFLICT && l.host === shared), 10_000, 50);
    await eventually(async () => (await reply(proxy, 'own.staging.sim.test')) === 0);
    assert.equal(await reply(proxy, shared), 2);
    const viaHttp = await curl(['-s', '-w', '%{http_code}', '--proxy', `http://${proxy.http}`, `http://${shared}/`]);
    assert.match(
      viaHttp.stdout,
      /web\.apps\.sim\.test is served by both prod and staging \(an Ingress or Route host in each\): add it to one route's include to choose\n403$/,
    );
    const pac = await pacFile(proxy);
    assert.equal(pac(shared), 'DIRECT');
    assert.equal(pac(INGRESS_SAMPLE.wild.example), 'DIRECT');
    assert.equal(pac('own.staging.sim.test'), `SOCKS5 ${proxy.socks}; PROXY ${proxy.http}`);
    // One line per shared host, naming both routes.
    const lines = proxy.logs.filter((l) => l.msg === CONFLICT).map((l) => ({ host: l.host, routes: l.routes, level: l.level }));
    lines.sort((a, b) => String(a.host).localeCompare(String(b.host)));
    assert.deepEqual(
      lines,
      [...INGRESS_SAMPLE.hosts].sort((a, b) => a.localeCompare(b)).map((host) => ({ host, routes: ['prod', 'staging'], level: 40 })),
    );

    const browser = await headlessChromium();
    if (!browser) return t.diagnostic('chromium not installed: browser check skipped');
    try {
      const pacFlag = `--proxy-pac-url=http://${proxy.http}/proxy.pac`;
      const direct = await browser.dump(`http://${shared}:${pagePort}/`, [pacFlag, `--host-resolver-rules=MAP ${shared} 127.0.0.1`]);
      assert.match(
        direct,
        new RegExp(`direct to ${shared.replace(/\./g, '\\.')}:${pagePort}`),
        'the browser went DIRECT, not to the proxy that refuses the host',
      );
      assert.match(await browser.dump('http://own.staging.sim.test/', [pacFlag]), /ingress own\.staging\.sim\.test \/ -&gt; shop\/web:8080/);
    } finally {
      await browser.close();
    }
  } finally {
    page.close();
    assert.equal(await proxy.stop(), 0);
  }
});

test("the refusal's advice followed: a host both clusters learnt, in one route's include, goes to that cluster's ingress controller; a Service form under an include is that Service", async () => {
  const shared = INGRESS_SAMPLE.web.host;
  await writeFile(
    configFile,
    `direct: false
routes:
  - { name: prod, kind: cluster, context: prod, default: true, include: [${shared}, corp.sim.test] }
  - { name: staging, kind: cluster, context: staging }
`,
  );
  const proxy = await startProxyProcess(['--kubeconfig', multi.kubeconfig, '--config', configFile, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug']);
  try {
    await eventually(async () => (await reply(proxy, shared)) === 0, 10_000, 50);
    assert.match(await viaIngress(proxy, shared), new RegExp(`^ingress ${shared.replace(/\./g, '\\.')} `));
    const web = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://web.shop.corp.sim.test:8080/']);
    assert.equal(web.code, 0, web.stderr);
    assert.match(web.stdout, /hello from web-/);
  } finally {
    assert.equal(await proxy.stop(), 0);
  }
});

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

      await prod!.sim.createIngress({
        namespace: 'shop',
        name: 'arriving',
        rules: [{ host: 'arriving.prod.sim.test', paths: [{ service: 'web', port: 8080 }] }],
      });
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
    await staging!.sim.createIngress({
      namespace: 'shop',
      name: 'later',
      rules: [{ host: 'later.staging.sim.test', paths: [{ service: 'web', port: 8080 }] }],
    });
    await eventually(async () => (await reply(proxy, 'later.prod.sim.test')) === 0 && (await reply(proxy, 'later.staging.sim.test')) === 0, 10_000, 100);
  } finally {
    assert.equal(await proxy.stop(), 0);
  }
});
