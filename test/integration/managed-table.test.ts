// One managed daemon for a whole routing table: `connect` with two contexts and a config file,
// `status` per route, `pac ID`, and `reload ID` that adds and removes routes, or — for a bad
// table — changes nothing, prints the error and exits non-zero.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { copyFile, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import vm from 'node:vm';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { runCli } from '../helpers/proxy-process.js';
import { eventually } from '../helpers/cluster.js';
import { curl } from '../helpers/curl.js';
import { statusItems } from '../helpers/status-json.js';

let multi: MultiCluster;
let stateDir: string;
let configFile: string;
let id = '';
let socksUrl = '';

const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: stateDir });
const cli = (args: string[], timeoutMs = 60_000) => runCli(args, { env: env(), timeoutMs });
const who = async (url: string) => {
  const r = await curl(['--proxy', socksUrl, url]);
  return r.code === 0 ? /hello from (\S+) \(/.exec(r.stdout)?.[1] : `curl ${r.code}`;
};
const TABLE = (withStaging: boolean) => `routes:
  - name: prod
    kind: cluster
    context: prod
${withStaging ? '  - name: staging\n    kind: cluster\n    context: staging\n' : ''}`;

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  await addWhich(multi.clusters[0]!);
  await addWhich(multi.clusters[1]!);
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-state-'));
  configFile = path.join(multi.dir, 'config.yaml');
  await writeFile(configFile, TABLE(false));
});

after(async () => {
  await cli(['quit']);
  rmSync(stateDir, { recursive: true, force: true });
  await multi?.close();
});

test('connect serves the table: every route answers; status shows each route; pac ID', async () => {
  const r = await cli([
    'connect',
    '--kubeconfig',
    multi.kubeconfig,
    '--config',
    configFile,
    '--context',
    'staging',
    '--listen-socks',
    '127.0.0.1:0',
    '--no-proxy-auth',
    '--json',
  ]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { id: string; env: Record<string, string> };
  id = out.id;
  socksUrl = out.env.ALL_PROXY!;
  assert.equal(await who('http://which.shop.staging/'), 'which-staging');
  assert.equal(await who('http://which.shop.prod/'), 'which-prod');
  assert.equal(await who('http://which/'), 'which-staging', '--context staging comes first: it is the default route');
  // Each cluster route has its own private kubeconfig in the proxy's directory, 0600.
  const files = readdirSync(path.join(stateDir, 'proxies', id)).filter((f) => f.startsWith('kubeconfig'));
  assert.deepEqual(files.sort(), ['kubeconfig', 'kubeconfig.prod']);
  for (const f of files) assert.equal(statSync(path.join(stateDir, 'proxies', id, f)).mode & 0o777, 0o600);
  // Streams count as open until their tear-down is over (about a second after the client left).
  const status = await eventually(
    async () => {
      const s = await cli(['status']);
      return /route prod [^\n]*; 0 open/.test(s.stdout) && s;
    },
    10_000,
    200,
  );
  assert.match(status.stdout, new RegExp(`${id}: route staging \\(cluster staging, default\\): [^\\n]*; ready; \\d+ open, 2 total`));
  assert.match(status.stdout, new RegExp(`${id}: route prod \\(cluster prod\\): <svc>\\.<ns>\\.prod; ready; 0 open, 1 total, up \\d+B, down \\d+`));
  const json = statusItems<{ routes: Array<{ name: string; state: string; kind: string; details: { kubeconfig?: string } }> }>(
    (await cli(['status', '--json'])).stdout,
  );
  assert.deepEqual(
    json[0]!.routes.map((x) => [x.name, x.kind, x.state, x.details.kubeconfig]),
    [
      // The file each route runs from: what doctor's kubectl lines name.
      ['staging', 'cluster', 'ready', path.join(stateDir, 'proxies', id, 'kubeconfig')],
      ['prod', 'cluster', 'ready', path.join(stateDir, 'proxies', id, 'kubeconfig.prod')],
    ],
  );
  const pac = await cli(['pac', id]);
  assert.equal(pac.code, 0, pac.stderr);
  const sandbox: Record<string, unknown> = {};
  vm.runInNewContext(pac.stdout, sandbox);
  const find = sandbox.FindProxyForURL as (u: string, h: string) => string;
  assert.match(find('http://which.shop.prod/', 'which.shop.prod'), /^SOCKS5 127\.0\.0\.1:\d+$/);
  assert.equal(find('http://example.com/', 'example.com'), 'DIRECT');
});

test('reload ID: a route added to the file serves; removed, it is refused; a bad file changes nothing', async () => {
  // prod is in the file; staging comes from --context. Add a reject route, then break the file.
  await writeFile(configFile, `${TABLE(false)}  - name: blocked\n    kind: reject\n    include: [ads.example.test]\n`);
  let r = await cli(['reload', id]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /reloaded: 3 routes/);
  assert.match(r.stdout, /route blocked \(reject\): ads\.example\.test/);
  const blocked = await curl(['--proxy', socksUrl, 'http://ads.example.test/']);
  assert.notEqual(blocked.code, 0);
  assert.equal(await who('http://which.shop.prod/'), 'which-prod');
  // prod leaves the file.
  await writeFile(configFile, 'routes: []\n');
  r = await cli(['reload']);
  assert.equal(r.code, 0, r.stderr);
  assert.match((await who('http://which.shop.prod/'))!, /^curl /, 'prod is no longer routed');
  assert.equal(await who('http://which.shop.staging/'), 'which-staging');
  const kubeconfigs = () => readdirSync(path.join(stateDir, 'proxies', id)).filter((f) => f.startsWith('kubeconfig'));
  assert.deepEqual(kubeconfigs(), ['kubeconfig'], "the removed route's credentials left the disk with it");
  // prod back, but its API server does not answer: the table is refused, and prod's credentials go.
  const closed = net.createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const deadPort = (closed.address() as net.AddressInfo).port;
  closed.close();
  await multi.writeKubeconfig({ prod: { server: `https://127.0.0.1:${deadPort}` } });
  try {
    await writeFile(configFile, TABLE(false));
    r = await cli(['reload', id]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /kept its routing table/);
    assert.deepEqual(kubeconfigs(), ['kubeconfig'], "a refused route's credentials are not left behind");
  } finally {
    await multi.writeKubeconfig();
  }
  // A file that does not validate: nothing changes.
  await writeFile(configFile, 'routes:\n  - name: prod\n    kind: cluster\n    context: prod\n    colour: blue\n');
  r = await cli(['reload', id]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /config\.yaml:5: .*colour/);
  // A context the kubeconfig does not have: nothing changes.
  await writeFile(configFile, 'routes:\n  - name: prod\n    kind: cluster\n    context: nowhere\n');
  r = await cli(['reload', id]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /context "nowhere" not found/);
  assert.equal(await who('http://which.shop.staging/'), 'which-staging');
  assert.match((await who('http://which.shop.prod/'))!, /^curl /);
});

test('reload ID: a route in error is made anew, so a kubeconfig fixed meanwhile is used; a reload while it still fails is taken', async () => {
  // staging's server is a port where nothing listens: that route is in error from the start.
  const closed = net.createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const deadPort = (closed.address() as net.AddressInfo).port;
  closed.close();
  const kubeconfig = path.join(multi.dir, 'kubeconfig-fixable');
  await multi.writeKubeconfig({ staging: { server: `https://127.0.0.1:${deadPort}` } });
  await copyFile(multi.kubeconfig, kubeconfig);
  await multi.writeKubeconfig();
  // --shutdown-grace 0: the disconnect at the end does not wait ~1 s for curl's last stream (the simulated runtime's close grace).
  const r = await cli([
    'connect',
    '--kubeconfig',
    kubeconfig,
    '--context',
    'prod',
    '--context',
    'staging',
    '--listen-socks',
    '127.0.0.1:0',
    '--no-proxy-auth',
    '--json',
    '--id',
    'fixable',
    '--shutdown-grace',
    '0',
  ]);
  assert.equal(r.code, 0, r.stderr);
  const proxy = (JSON.parse(r.stdout) as { env: Record<string, string> }).env.ALL_PROXY!;
  const via = async (url: string) => (await curl(['-s', '--proxy', proxy, url])).stdout;
  assert.match(await via('http://which.shop.prod/'), /hello from which-prod/);
  assert.doesNotMatch(await via('http://which.shop.staging/'), /hello/);
  // A reload while it still fails: taken (the route is made anew and goes on trying).
  const early = await cli(['reload', 'fixable']);
  assert.equal(early.code, 0, early.stderr);
  assert.match(await via('http://which.shop.prod/'), /hello from which-prod/);
  // The kubeconfig is fixed; the reload carries it to the route in error.
  await copyFile(multi.kubeconfig, kubeconfig);
  const reloaded = await cli(['reload', 'fixable']);
  assert.equal(reloaded.code, 0, reloaded.stderr);
  await eventually(async () => /hello from which-staging/.test(await via('http://which.shop.staging/')), 15_000, 250);
  assert.equal((await cli(['disconnect', 'fixable'])).code, 0);
});

test('reload ID: when the file makes another context the default route, status names that context', async () => {
  const file = path.join(multi.dir, 'default-moves.yaml');
  const routes = (first: string, second: string) =>
    `routes:\n  - name: ${first}\n    kind: cluster\n    context: ${first}\n  - name: ${second}\n    kind: cluster\n    context: ${second}\n`;
  await writeFile(file, routes('prod', 'staging'));
  const c = await cli(['connect', '--kubeconfig', multi.kubeconfig, '--config', file, '--id', 'moves', '--listen-socks', '127.0.0.1:0', '--no-proxy-auth']);
  assert.equal(c.code, 0, c.stderr);
  const target = async () => statusItems<{ context: string; server: string }>((await cli(['status', 'moves', '--json'])).stdout)[0]!;
  assert.equal((await target()).context, 'prod');
  await writeFile(file, routes('staging', 'prod'));
  const r = await cli(['reload', 'moves']);
  assert.equal(r.code, 0, r.stderr);
  const after = await target();
  assert.equal(after.context, 'staging', 'the default route is staging now');
  assert.equal(after.server, multi.clusters[1]!.sim.server);
  assert.equal((await cli(['disconnect', 'moves'])).code, 0);
});
