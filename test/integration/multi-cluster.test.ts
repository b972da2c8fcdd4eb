// One proxy for two clusters (two simulated API servers, overlapping address ranges): names by
// route suffix and by the default route's cluster forms, label boundaries and excludes, IPs by
// which cluster knows them (both knowing one is a refusal naming both, a CIDR settles it), reject
// routes, direct pass-through (refusing loopback by default; to the test's own loopback server when
// its allow list names it), a cluster that is down at start,
// and reloads (adding, removing, and an invalid change that changes nothing).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { eventually } from '../helpers/cluster.js';
import { TEST_RETRY_ENV } from '../../src/routes/guest-cluster/lifecycle.js';
import { TEST_RELOAD_SYNC_WAIT_ENV } from '../../src/proxy/proxy.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { statusItem } from '../helpers/status-json.js';
import { openStream, roundTrip } from '../helpers/streams.js';

let multi: MultiCluster;
let prodWhich: { clusterIP: string; podIP: string };
let stagingWhich: { clusterIP: string; podIP: string };
let collidingIp: string;
let configFile: string;
let proxy: ProxyProcess;

const STAGING_ROUTE = `  - name: staging
    kind: cluster
    context: staging
    cidrs: [SETTLED/32]
`;
let settledIp = '';
const CONFIG = (extra = '') => `# two clusters, a blocklist
direct: false
routes:
  - name: prod
    kind: cluster
    context: prod
    default: true
    exclude: [legacy.prod]
${STAGING_ROUTE.replace('SETTLED', settledIp)}  - name: blocked
    kind: reject
    include: [ads.example.test]
${extra}`;

const via = (url: string, extra: string[] = []) => curl(['--proxy', `socks5h://${proxy.socks}`, ...extra, url]);
const who = async (url: string) => {
  const r = await via(url);
  assert.equal(r.code, 0, `${url}: ${r.stderr}`);
  return /hello from (\S+) \(/.exec(r.stdout)?.[1];
};
async function reply(host: string, port: number): Promise<number> {
  const { reply: code, socket } = await socks5Connect(proxy.socks!, host, port);
  socket.destroy();
  return code;
}

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  const [prod, staging] = multi.clusters;
  prodWhich = await addWhich(prod!);
  stagingWhich = await addWhich(staging!);
  // A staging Service holding a ClusterIP prod also has: neither cluster may take it silently.
  collidingIp = prodWhich.clusterIP;
  await staging!.sim.createService({
    namespace: 'shop',
    name: 'twin',
    clusterIP: collidingIp,
    selector: { app: 'which' },
    ports: [{ port: 80, targetPort: 8080 }],
  });
  // Another address in both clusters, which the config gives to staging.
  settledIp = (await prod!.sim.createService({ namespace: 'shop', name: 'settled', selector: { app: 'which' }, ports: [{ port: 80, targetPort: 8080 }] }))
    .clusterIP;
  await staging!.sim.createService({
    namespace: 'shop',
    name: 'settled',
    clusterIP: settledIp,
    selector: { app: 'which' },
    ports: [{ port: 80, targetPort: 8080 }],
  });
  configFile = path.join(multi.dir, 'config.yaml');
  await writeFile(configFile, CONFIG());
  proxy = await startProxyProcess(
    ['--kubeconfig', multi.kubeconfig, '--config', configFile, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0', '--log-level', 'debug'],
    { env: { [TEST_RELOAD_SYNC_WAIT_ENV]: '1500' } },
  );
});

after(async () => {
  assert.equal(await proxy?.stop(), 0);
  await multi?.close();
});

describe('names', () => {
  test('each route answers <svc>.<ns>[.svc].<route>; the default route also the cluster.local forms and short names', async () => {
    assert.equal(await who('http://which.shop.prod/'), 'which-prod');
    assert.equal(await who('http://which.shop.staging/'), 'which-staging');
    assert.equal(await who('http://which.shop.svc.staging/'), 'which-staging');
    assert.equal(await who('http://which.shop.svc.cluster.local/'), 'which-prod');
    assert.equal(await who('http://which.shop/'), 'which-prod');
    assert.equal(await who('http://which/'), 'which-prod');
    assert.equal(await who('http://WHICH.Shop.Staging./'), 'which-staging', 'case-insensitive, trailing dot ignored');
  });

  test('suffixes match whole labels; an exclude takes the name away from its route', async () => {
    assert.equal(await reply('which.shop.xstaging', 80), 2, 'xstaging is not staging');
    assert.equal(await reply('which.shop.staging.evil.test', 80), 2);
    assert.equal(await reply('which.legacy.prod', 80), 2, 'excluded from prod, and nothing else claims it');
    assert.equal(await reply('ads.example.test', 443), 2, 'the reject route');
    assert.equal(await reply('tracker.ads.example.test', 443), 2);
    const r = await curl(['--proxy', `http://${proxy.http}`, 'http://ads.example.test/']);
    assert.match(r.stdout, /blocked by route blocked/);
  });

  test('the startup lines list each route and what it serves', () => {
    const out = proxy.stdout.join('\n');
    assert.match(out, /route prod \(cluster prod, default\): <svc>\.<ns>\.prod, \*\.cluster\.local/);
    assert.match(out, new RegExp(`route staging \\(cluster staging\\): <svc>\\.<ns>\\.staging, ${settledIp.replace(/\./g, '\\.')}/32`));
    assert.match(out, /route blocked \(reject\): ads\.example\.test/);
  });
});

describe('IP addresses', () => {
  test('a ClusterIP or Pod IP goes to the one cluster that knows it', async () => {
    assert.equal(await who(`http://${stagingWhich.clusterIP}/`), 'which-staging');
    assert.equal(await who(`http://${stagingWhich.podIP}:8080/`), 'which-staging');
    assert.equal(await who(`http://${prodWhich.podIP}:8080/`), 'which-prod');
  });

  test('a Pod IP behind no Service is looked up in the clusters (pods are not watched) and reached', async () => {
    const [, staging] = multi.clusters;
    const { ip } = await staging!.sim.createPod({ namespace: 'shop', name: 'loner', ports: [{ containerPort: 8080, backend: 'http' }] });
    assert.equal(await who(`http://${ip}:8080/`), 'loner');
  });

  test('an IP both clusters know is refused, naming both; a CIDR in the config settles it', async () => {
    assert.equal(await reply(collidingIp, 80), 2);
    const r = await curl(['--proxy', `http://${proxy.http}`, `http://${collidingIp}/`]);
    assert.equal(r.stdout.includes('prod and staging') || r.stdout.includes('staging and prod'), true, r.stdout);
    assert.equal(await who(`http://${settledIp}/`), 'which-staging', 'the config gives it to staging');
  });
});

describe('reload', () => {
  const reloaded = async (mark: number) =>
    eventually(async () => proxy.logs.slice(mark).some((l) => l.msg === 'routing table reloaded'), 15_000, 50).catch((err) => {
      throw new Error(`${err}: ${JSON.stringify(proxy.logs.slice(mark).filter((l) => /reload/.test(String(l.msg))))}`);
    });

  test('SIGHUP: a removed route is refused while its open streams keep flowing; added again, it serves', async () => {
    const held = await openStream(proxy.socks!, 'echo.data.staging', 7000);
    assert.ok((await roundTrip(held, Buffer.from('before'))).equals(Buffer.from('before')));
    let mark = proxy.logs.length;
    await writeFile(configFile, CONFIG().replace(STAGING_ROUTE.replace('SETTLED', settledIp), ''));
    proxy.proc.kill('SIGHUP');
    await reloaded(mark);
    assert.equal(await reply('which.shop.staging', 80), 2, 'staging is gone from the table');
    assert.equal(await who('http://which.shop.prod/'), 'which-prod');
    assert.ok((await roundTrip(held, Buffer.from('after'))).equals(Buffer.from('after')), 'the stream opened before the reload still flows');
    held.socket.destroy();
    mark = proxy.logs.length;
    await writeFile(configFile, CONFIG());
    proxy.proc.kill('SIGHUP');
    await reloaded(mark);
    assert.equal(await who('http://which.shop.staging/'), 'which-staging', 'added (again): synced before it was swapped in');
  });

  test('a route whose first sync outlasts what a reload waits for is swapped in syncing; it serves once synced', async () => {
    const staging = multi.clusters[1]!.sim;
    let mark = proxy.logs.length;
    await writeFile(configFile, CONFIG().replace(STAGING_ROUTE.replace('SETTLED', settledIp), ''));
    proxy.proc.kill('SIGHUP');
    await reloaded(mark);
    // Paged LISTs (no watch-list), held: the new route's sync gets nowhere until they are let go.
    staging.setWatchList(false);
    staging.stallLists(true);
    try {
      mark = proxy.logs.length;
      await writeFile(configFile, CONFIG());
      proxy.proc.kill('SIGHUP');
      await reloaded(mark);
      assert.ok(
        proxy.logs.slice(mark).some((l) => l.msg === 'route still syncing after the reload; it serves once synced' && l.route === 'staging'),
        'the reload said it did not wait for the sync',
      );
      assert.equal(await who('http://which.shop.prod/'), 'which-prod', 'the other route serves meanwhile');
    } finally {
      staging.stallLists(false);
      staging.setWatchList(true);
    }
    assert.equal(await who('http://which.shop.staging/'), 'which-staging', 'synced once the lists were answered');
  });

  test('an invalid change (unknown key, unknown context) changes nothing and is logged', async () => {
    const before = proxy.logs.length;
    await writeFile(configFile, CONFIG('    colour: blue\n'));
    proxy.proc.kill('SIGHUP');
    await eventually(async () => proxy.logs.slice(before).some((l) => l.msg === 'reload failed; the routing table is unchanged'), 10_000, 50);
    const failed = proxy.logs.slice(before).find((l) => l.msg === 'reload failed; the routing table is unchanged')!;
    assert.match(String(failed.error), /config\.yaml:\d+: .*colour/);
    await writeFile(configFile, CONFIG().replace('context: staging', 'context: nowhere'));
    const mark = proxy.logs.length;
    proxy.proc.kill('SIGHUP');
    await eventually(async () => proxy.logs.slice(mark).some((l) => l.msg === 'reload failed; the routing table is unchanged'), 10_000, 50);
    assert.equal(await who('http://which.shop.staging/'), 'which-staging', 'the last good table still serves');
    assert.equal(proxy.proc.exitCode, null);
  });

  test('a reload that makes another route the default: the live page names its context, and short names go there', async () => {
    const line = proxy.stdout.find((l) => l.includes('live page at'));
    assert.ok(line, proxy.stdout.join('\n'));
    const page = new URL(/live page at (\S+)/.exec(line)![1]!);
    const pageContext = async () => {
      const res = await fetch(`${page.origin}/ui/events${page.search}`, { headers: { Host: page.host } });
      const reader = res.body!.getReader();
      let text = '';
      while (!/\n\ndata: .*\n/.test(text)) text += new TextDecoder().decode((await reader.read()).value);
      await reader.cancel();
      return (JSON.parse(/\n\ndata: (.*)\n/.exec(text)![1]!) as { info: { context: string } }).info.context;
    };
    assert.equal(await pageContext(), 'prod');
    const mark = proxy.logs.length;
    await writeFile(configFile, CONFIG().replace('    default: true\n', '').replace('context: staging\n', 'context: staging\n    default: true\n'));
    proxy.proc.kill('SIGHUP');
    await reloaded(mark);
    try {
      assert.equal(await who('http://which.shop/'), 'which-staging');
      assert.equal(await pageContext(), 'staging');
    } finally {
      const back = proxy.logs.length;
      await writeFile(configFile, CONFIG());
      proxy.proc.kill('SIGHUP');
      await reloaded(back);
    }
  });
});

describe('a cluster whose API server goes away', () => {
  test('its own names fail while it is gone; the other cluster keeps serving; it comes back', async () => {
    const [prod] = multi.clusters;
    // Down until the checks below have seen it gone.
    let bringUp!: () => void;
    const down = prod!.sim.restartApiServer(new Promise<void>((r) => (bringUp = r)));
    try {
      // Give the proxy's tunnels and watches to prod time to break.
      await new Promise((r) => setTimeout(r, 500));
      for (let i = 0; i < 5; i++) assert.equal(await who('http://which.shop.staging/'), 'which-staging', 'staging is untouched');
      const failing = await via('http://which.shop.prod/', ['--max-time', '3']);
      assert.notEqual(failing.code, 0, 'prod has no API server right now');
    } finally {
      bringUp();
    }
    await down;
    await eventually(async () => (await via('http://which.shop.prod/')).code === 0, 20_000, 200);
    assert.equal(await who('http://which.shop.prod/'), 'which-prod');
  });
});

describe('a cluster that is down at start and comes up later', () => {
  test('the proxy starts with the other cluster, and the late one serves once its API server answers', async () => {
    const [prod] = multi.clusters;
    // prod's API server stays down until the proxy has started without it and staging served.
    let bringUp!: () => void;
    const down = prod!.sim.restartApiServer(new Promise<void>((r) => (bringUp = r)));
    // The route retries 0.5 s after its first failure, not 5 s (routes/guest-cluster/lifecycle.ts TEST_RETRY_ENV, a
    // test hook): that it retries and then serves is tested, not how long it waits.
    const p3 = await startProxyProcess(['--kubeconfig', multi.kubeconfig, '--context', 'staging', '--context', 'prod', '--listen-socks', '127.0.0.1:0'], {
      env: { [TEST_RETRY_ENV]: '500' },
    }).catch((err: unknown) => {
      bringUp();
      throw err;
    });
    try {
      await eventually(
        async () => p3.logs.some((l) => l.msg === 'route not available at start; the others serve, it keeps trying' && l.route === 'prod'),
        5_000,
        20,
      );
      const staging = await curl(['--proxy', `socks5h://${p3.socks}`, 'http://which.shop.staging/']);
      assert.match(staging.stdout, /hello from which-staging/);
      bringUp();
      await down;
      // Retried in the background (0.5 s here, then doubling): prod serves without a restart of the proxy.
      const late = await eventually(
        async () => {
          const r = await curl(['--proxy', `socks5h://${p3.socks}`, 'http://which.shop.prod/']);
          return r.code === 0 && r;
        },
        30_000,
        250,
      );
      assert.match(late.stdout, /hello from which-prod/);
    } finally {
      bringUp(); // a failure above must not leave prod down for the tests after this one
      assert.equal(await p3.stop(), 0);
    }
  });
});

describe('direct pass-through and a cluster that is down', () => {
  test('--direct dials what no route claims (loopback only when allowed); a down cluster fails only its own names', async () => {
    const server = http.createServer((req, res) => res.end(`direct ${req.headers.host}\n`)).listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as { port: number }).port;
    // staging points at a port where nothing listens.
    const closed = http.createServer().listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const deadPort = (closed.address() as { port: number }).port;
    closed.close();
    const kubeconfig = path.join(multi.dir, 'kubeconfig-down');
    await multi.writeKubeconfig({ staging: { server: `https://127.0.0.1:${deadPort}` } });
    const { copyFile } = await import('node:fs/promises');
    await copyFile(multi.kubeconfig, kubeconfig);
    await multi.writeKubeconfig();
    // By default a direct route does not dial this machine's loopback (nor link-local, metadata).
    const strict = await startProxyProcess([
      '--kubeconfig',
      kubeconfig,
      '--context',
      'prod',
      '--direct',
      '--listen-socks',
      '127.0.0.1:0',
      '--listen-http',
      '127.0.0.1:0',
    ]);
    try {
      const refused = await socks5Connect(strict.socks!, 'localhost', port);
      refused.socket.destroy();
      assert.equal(refused.reply, 2, 'not allowed');
      const viaHttp = await curl(['-s', '-w', '%{http_code}', '--proxy', `http://${strict.http}`, `http://127.0.0.1:${port}/`]);
      assert.match(
        viaHttp.stdout,
        /route direct: 127\.0\.0\.1 is a loopback address: a direct route dials loopback, link-local and cloud-metadata addresses only when its allow list names them[^\n]*\n403$/,
      );
      const metadata = await socks5Connect(strict.socks!, '169.254.169.254', 80);
      metadata.socket.destroy();
      assert.equal(metadata.reply, 2, 'cloud metadata: not allowed, and not dialled');
    } finally {
      assert.equal(await strict.stop(), 0);
    }
    const allowConfig = path.join(multi.dir, 'direct-allow.yaml');
    await writeFile(allowConfig, 'routes:\n  - name: direct\n    kind: direct\n    allow: [127.0.0.0/8, "::1"]\n');
    const p2 = await startProxyProcess([
      '--kubeconfig',
      kubeconfig,
      '--config',
      allowConfig,
      '--context',
      'prod',
      '--context',
      'staging',
      '--direct',
      '--listen-socks',
      '127.0.0.1:0',
      '--listen-http',
      '127.0.0.1:0',
    ]);
    try {
      const direct = await curl(['--proxy', `socks5h://${p2.socks}`, `http://localhost:${port}/`]);
      assert.equal(direct.code, 0, direct.stderr);
      assert.match(direct.stdout, /^direct localhost:/);
      const prod = await curl(['--proxy', `socks5h://${p2.socks}`, 'http://which.shop.prod/']);
      assert.match(prod.stdout, /hello from which-prod/);
      const { reply: code, socket } = await socks5Connect(p2.socks!, 'which.shop.staging', 80);
      socket.destroy();
      assert.equal(code, 4, 'the down cluster: host unreachable, at once');
      const viaHttp = await curl(['-s', '-w', '%{http_code}', '--proxy', `http://${p2.http}`, 'http://which.shop.staging/']);
      assert.match(
        viaHttp.stdout,
        /cluster route staging is not available: cannot reach the API server https:\/\/127\.0\.0\.1:\d+ \(context "staging"\)[^\n]*\n502$/,
      );
      await eventually(
        async () => p2.logs.some((l) => l.msg === 'route not available at start; the others serve, it keeps trying' && l.route === 'staging'),
        5_000,
        20,
      );
      // The proxy never dials its own listener.
      const self = await socks5Connect(p2.socks!, '127.0.0.1', Number(p2.socks!.split(':')[1]));
      self.socket.destroy();
      assert.equal(self.reply, 2);
    } finally {
      assert.equal(await p2.stop(), 0);
      server.close();
    }
  });
});

/**
 * A page on a loopback "LAN" server, a table of a reject and a direct route only (no cluster), and
 * an environment whose HOME and KUBECONFIG lead to no kubeconfig at all.
 */
async function lanWithoutCluster(tag: string) {
  const server = http.createServer((_req, res) => res.end('lan page\n')).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  const home = path.join(multi.dir, `home-${tag}-no-cluster`);
  const config = path.join(multi.dir, `${tag}-no-cluster.yaml`);
  await writeFile(
    config,
    'direct: true\nroutes:\n  - {name: blocked, kind: reject, include: [ads.example.com]}\n  - {name: direct, kind: direct, allow: [127.0.0.0/8]}\n',
  );
  return { server, port, config, env: { HOME: home, KUBECONFIG: path.join(home, 'no-such-kubeconfig') } };
}

describe('a table without a cluster', () => {
  test('direct and reject routes alone: no kubeconfig read, the proxy serves them', async () => {
    const { server, port, config, env } = await lanWithoutCluster('foreground');
    const p = await startProxyProcess(['--config', config, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0'], { env });
    try {
      assert.match(p.stdout.join(''), /SOCKS5 proxy on 127\.0\.0\.1:\d+ \(2 routes; no cluster\)/);
      const page = await curl(['--proxy', `socks5h://${p.socks}`, `http://127.0.0.1:${port}/`]);
      assert.equal(page.stdout, 'lan page\n', page.stderr);
      const blocked = await socks5Connect(p.socks!, 'ads.example.com', 443);
      blocked.socket.destroy();
      assert.equal(blocked.reply, 2);
    } finally {
      assert.equal(await p.stop(), 0);
      server.close();
    }
  });
});

test('managed: connect, status, exec, reload and disconnect serve a table without a cluster, with no kubeconfig', async () => {
  const { server, port, config, env: noKubeconfig } = await lanWithoutCluster('managed');
  const env = { ...noKubeconfig, KUBECTL_PROXYOUT_STATE_DIR: path.join(multi.dir, 'state-no-cluster') };
  const cli = (args: string[]) => runCli(args, { env, timeoutMs: 60_000 });
  const c = await cli(['connect', '--config', config, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth']);
  try {
    assert.equal(c.code, 0, c.stderr);
    assert.match(c.stderr, /SOCKS5 proxy on 127\.0\.0\.1:\d+ \(2 routes; no cluster\)/);
    assert.match(c.stderr, /route blocked/);
    const id = /connected (\S+) \(pid/.exec(c.stderr)![1]!;
    const socks = /^export ALL_PROXY=(\S+)$/m.exec(c.stdout)![1]!;
    const page = await curl(['--proxy', socks, `http://127.0.0.1:${port}/`]);
    assert.equal(page.stdout, 'lan page\n', page.stderr);

    const table = await cli(['status']);
    assert.match(table.stdout, new RegExp(`^${id} +running +- +- +\\d+ `, 'm'), table.stdout);
    const routes = statusItem<{ context: string; cache: unknown; routes: Array<{ name: string; state: string }> }>(
      (await cli(['status', id, '--json'])).stdout,
    );
    assert.equal(routes.context, '');
    assert.equal(routes.cache, null, 'no cluster route: no cache, not one syncing for ever');
    assert.deepEqual(routes.routes.map((r) => [r.name, r.state]).sort(), [
      ['blocked', 'ready'],
      ['direct', 'ready'],
    ]);

    // Named: a SOCKS-only managed proxy serves exec only when asked for (see exec's help).
    const ran = await cli(['exec', '--config', config, '--id', id, '--', 'sh', '-c', `curl -s http://127.0.0.1:${port}/`]);
    assert.equal(ran.code, 0, ran.stderr);
    assert.match(ran.stderr, new RegExp(`using managed proxy ${id} \\(no cluster; socks 127`));
    assert.equal(ran.stdout, 'lan page\n');
    const reloaded = await cli(['reload', id]);
    assert.equal(reloaded.code, 0, reloaded.stderr);
  } finally {
    const d = await cli(['disconnect', '--all']);
    assert.equal(d.code, 0, d.stderr);
    server.close();
  }
});

describe('a route the user configured that cannot be used as written', () => {
  test('stops the start naming the route, though another route could serve (an outage would not)', async () => {
    const home = path.join(multi.dir, 'home-pkcs11');
    await mkdir(path.join(home, '.ssh'), { recursive: true, mode: 0o700 });
    await writeFile(path.join(home, '.ssh', 'config'), 'Host bastion\n  HostName 127.0.0.1\n  PKCS11Provider /usr/lib/opensc-pkcs11.so\n', { mode: 0o600 });
    const config = path.join(multi.dir, 'bad-ssh.yaml');
    await writeFile(
      config,
      'routes:\n  - {name: prod, kind: cluster, context: prod}\n  - {name: jump, kind: ssh, ssh: {host: bastion}, include: [corp.example]}\n',
    );
    const r = await runCli(['--kubeconfig', multi.kubeconfig, '--config', config, '--listen-socks', '127.0.0.1:0', '--listen-http', 'off'], {
      env: { HOME: home },
      timeoutMs: 20_000,
    });
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(`^Error: route jump \\(${config.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:3\\): ssh bastion: .*PKCS11Provider .* is not supported`, 'm'),
    );
    assert.doesNotMatch(r.stderr, /proxy ready/);
  });
});
