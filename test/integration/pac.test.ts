// The PAC file: served at /proxy.pac to loopback peers, printed by `pac`, and used by a real
// browser: Chromium with --proxy-pac-url loads a cluster page through the proxy and a page of the
// test's own server directly — the proxy never sees the latter.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import vm from 'node:vm';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { headlessChromium } from '../helpers/chromium.js';

let cluster: TestCluster;
let proxy: ProxyProcess;
let page: http.Server;
let pagePort = 0;

before(async () => {
  cluster = await startTestCluster();
  // The direct route may dial loopback (the test's own page): the control below needs it. A file
  // with routes gets no implicit cluster route: --context names the cluster.
  const config = path.join(cluster.dir, 'direct-allow.yaml');
  await writeFile(config, 'routes:\n  - name: direct\n    kind: direct\n    allow: [127.0.0.0/8]\n');
  proxy = await startProxyProcess([
    '--kubeconfig',
    cluster.kubeconfig,
    '--config',
    config,
    '--context',
    'sim',
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--direct',
  ]);
  page = http.createServer((_req, res) => res.end('<html><body>a page of our own</body></html>')).listen(0, '127.0.0.1');
  await once(page, 'listening');
  pagePort = (page.address() as { port: number }).port;
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  assert.equal(await proxy?.stop(), 0);
  page?.close();
  await cluster?.close();
});

/** Runs FindProxyForURL from a PAC text the way a browser does (no DNS helpers are needed). */
function findProxy(pac: string, url: string): string {
  const sandbox: Record<string, unknown> = {};
  vm.runInNewContext(pac, sandbox);
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  return (sandbox.FindProxyForURL as (u: string, h: string) => string)(url, host);
}

test('GET /proxy.pac: served to loopback Hosts only, and it sends cluster names to the proxy', async () => {
  const port = proxy.http!.split(':')[1];
  const r = await curl(['-i', `http://127.0.0.1:${port}/proxy.pac`]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^HTTP\/1\.1 200/);
  assert.match(r.stdout, /content-type: application\/x-ns-proxy-autoconfig/i);
  const pac = r.stdout.slice(r.stdout.indexOf('\r\n\r\n') + 4);
  assert.equal(findProxy(pac, 'http://web.shop.svc.cluster.local:8080/'), `SOCKS5 ${proxy.socks}; PROXY ${proxy.http}`);
  assert.equal(findProxy(pac, 'http://web.shop/'), `SOCKS5 ${proxy.socks}; PROXY ${proxy.http}`);
  assert.equal(findProxy(pac, 'https://example.com/'), 'DIRECT');
  assert.equal((await curl(['-s', '-o', '/dev/null', '-w', '%{http_code}', `http://localhost:${port}/proxy.pac`])).stdout, '200');
  // A page that rebinds its own name to 127.0.0.1 sends its own Host.
  const rebound = await curl(['-s', '-o', '/dev/null', '-w', '%{http_code}', '-H', 'Host: attacker.example:80', `http://127.0.0.1:${port}/proxy.pac`]);
  assert.equal(rebound.stdout, '403');
  const named = await curl(['-s', '-o', '/dev/null', '-w', '%{http_code}', '-H', `Host: something.localhost:${port}`, `http://127.0.0.1:${port}/proxy.pac`]);
  assert.equal(named.stdout, '403');
});

test('`pac` prints the PAC file the flags would serve', async () => {
  const r = await runCli(['pac', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:1080', '--listen-http', '127.0.0.1:3128']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(findProxy(r.stdout, 'http://api.shop.svc.cluster.local/'), 'SOCKS5 127.0.0.1:1080; PROXY 127.0.0.1:3128');
  assert.equal(findProxy(r.stdout, 'http://api/'), 'SOCKS5 127.0.0.1:1080; PROXY 127.0.0.1:3128', 'short names of the default cluster');
  assert.equal(findProxy(r.stdout, 'http://intranet.example.test/'), 'DIRECT');

  // A proxy's whole command line is accepted; the flags that do not shape the file are not listed.
  const same = await runCli([
    'pac',
    '--kubeconfig',
    cluster.kubeconfig,
    '--listen-socks',
    '127.0.0.1:1080',
    '--listen-http',
    '127.0.0.1:3128',
    '--connect-timeout',
    '5s',
    '--transport',
    'websocket',
    '--max-streams',
    '8',
  ]);
  assert.equal(same.code, 0, same.stderr);
  assert.equal(same.stdout, r.stdout);
  // A bad listen address: the foreground proxy's one line and exit status, naming the flag.
  for (const [flag, value] of [
    ['--listen-socks', 'nope'],
    ['--listen-http', '[::1]'],
  ]) {
    const pac = await runCli(['pac', '--kubeconfig', cluster.kubeconfig, flag!, value!]);
    const serve = await runCli(['--kubeconfig', cluster.kubeconfig, flag!, value!]);
    assert.equal(serve.code, 1, serve.stderr);
    assert.match(serve.stderr, new RegExp(`^Error: ${flag} \\S+: invalid listen address .*\n$`));
    assert.equal(pac.code, serve.code);
    assert.equal(pac.stderr, serve.stderr);
    assert.equal(pac.stdout, '');
  }
  const help = await runCli(['pac', '--help']);
  assert.match(help.stdout, /--listen-socks/);
  assert.match(help.stdout, /--\[no-\]direct/);
  assert.doesNotMatch(help.stdout, /--connect-timeout|--transport|--max-streams|--proxy-auth|Unused here/);
});

test('`pac ID` prints, byte for byte, the file that managed proxy serves at /proxy.pac (its namespaces included)', async (t) => {
  const stateDir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-pac-state-'));
  const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir };
  t.after(async () => {
    await runCli(['quit'], { env });
    await rm(stateDir, { recursive: true, force: true });
  });
  const connected = await runCli(
    ['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0', '--no-proxy-auth', '--json'],
    { env, timeoutMs: 60_000 },
  );
  assert.equal(connected.code, 0, connected.stderr);
  const { id, socks, http: httpAddr } = JSON.parse(connected.stdout) as { id: string; socks: string; http: string };
  const served = await curl(['-s', '-f', `http://${httpAddr}/proxy.pac`]);
  assert.equal(served.code, 0, served.stderr);
  const printed = await runCli(['pac', id], { env });
  assert.equal(printed.code, 0, printed.stderr);
  assert.equal(printed.stdout, served.stdout, 'the same bytes');
  // svc.ns names route through the proxy because the daemon knows the namespace "shop".
  assert.equal(findProxy(printed.stdout, 'http://web.shop/'), `SOCKS5 ${socks}; PROXY ${httpAddr}`);
  assert.equal(findProxy(printed.stdout, 'http://web.nonexistent-ns/'), 'DIRECT');

  const unknown = await runCli(['pac', 'nosuchid'], { env });
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /^Error: .*nosuchid/);

  // A dead proxy is still listed by `status`: `pac` says it is dead, not that there is none.
  const { pid } = JSON.parse(connected.stdout) as { pid: number };
  process.kill(pid, 'SIGKILL');
  await eventually(async () => {
    const dead = await runCli(['pac', id], { env });
    assert.equal(dead.code, 1);
    assert.equal(dead.stdout, '');
    assert.equal(dead.stderr, `Error: proxy ${id} is dead, not running (clean up with: kubectl proxyout disconnect ${id})\n`);
    return true;
  });
});

test('Chromium with --proxy-pac-url: the cluster page through the proxy, our own page directly', async (t) => {
  const browser = await headlessChromium();
  if (!browser) return t.skip('chromium not installed: browser check skipped');
  const port = proxy.http!.split(':')[1];
  const dump = (url: string, proxyFlag = `--proxy-pac-url=http://127.0.0.1:${port}/proxy.pac`) => browser.dump(url, [proxyFlag]);
  try {
    assert.match(await dump('http://web.shop.svc.cluster.local:8080/'), /hello from web-\S+ \(shop\) port 8081/);
    assert.match(await dump(`http://127.0.0.1:${pagePort}/`), /a page of our own/);
    const streams = proxy.logs.filter((l) => l.msg === 'stream open').map((l) => String(l.target));
    assert.ok(
      streams.some((s) => s.startsWith('web.shop.svc.cluster.local')),
      `the cluster page came through the proxy: ${streams.join(', ')}`,
    );
    assert.ok(!streams.some((s) => s.endsWith(`:${pagePort}`)), `our own page never reached the proxy: ${streams.join(', ')}`);
    // The control: told to use the proxy for everything, the same browser does send that page
    // through it (direct pass-through is on), so the absence above is the PAC's doing.
    assert.match(await dump(`http://127.0.0.1:${pagePort}/`, `--proxy-server=socks5://${proxy.socks}`), /a page of our own/);
    await eventually(async () => proxy.logs.some((l) => l.msg === 'stream open' && String(l.target).endsWith(`:${pagePort}`)), 5_000, 50);
  } finally {
    await browser.close();
  }
});
