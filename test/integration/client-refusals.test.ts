// What real clients show when the HTTP listener refuses: most print the status line alone and
// never the body that names the route — kubectl (Go's client: "Unable to connect to the server:
// Bad Gateway"), OpenBSD nc (ssh's ProxyCommand), wget, Java's HttpURLConnection, Python's
// urllib. The reason phrase carries the message, so each of them says why.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';

let cluster: TestCluster;
let proxy: ProxyProcess;
let scratch: string;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0']);
  scratch = mkdtempSync(path.join(tmpdir(), 'proxyout-refusals-'));
});

after(async () => {
  await proxy?.stop();
  await cluster?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** Runs a client; undefined when it is not installed. */
function run(command: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string } | undefined> {
  const noProxy = { NO_PROXY: '', no_proxy: '', HTTPS_PROXY: '', https_proxy: '', HTTP_PROXY: '', http_proxy: '', ALL_PROXY: '', all_proxy: '' };
  return new Promise((resolve) =>
    execFile(command, args, { timeout: 60_000, env: { ...process.env, ...noProxy, HOME: scratch, ...env } }, (err, stdout, stderr) => {
      if ((err as NodeJS.ErrnoException | null)?.code === 'ENOENT') return resolve(undefined);
      resolve({ code: typeof err?.code === 'number' ? err.code : err ? 1 : 0, stdout, stderr });
    }),
  );
}

/** A kubeconfig for a second cluster's API server, as a Service of this one (here: one that does not exist). */
function otherCluster(): string {
  const kubeconfig = path.join(scratch, 'kubeconfig-other-cluster');
  writeFileSync(kubeconfig, cluster.sim.kubeconfigYaml({ server: 'https://apiserver-b.clusters.svc:443' }), { mode: 0o600 });
  return kubeconfig;
}

const noService = (name: string, namespace = 'shop') => `cluster route sim: no Service "${name}" in namespace "${namespace}"`;

test('nc -X connect (an ssh ProxyCommand) prints the refused CONNECT with the route and the reason', async (t) => {
  const r = await run('nc', ['-X', 'connect', '-x', proxy.http!, '-w', '10', 'nope.shop', '22']);
  if (r === undefined) return t.skip('nc not on PATH (netcat-openbsd)');
  assert.notEqual(r.code, 0);
  assert.ok(r.stderr.includes(`HTTP/1.1 502 Bad Gateway (kubectl-proxyout: cannot connect to nope.shop:22: ${noService('nope')})`), `nc's stderr: ${r.stderr}`);
});

test('kubectl with HTTPS_PROXY, its API server a Service the cluster lacks: its error names the route and what is missing', async (t) => {
  const r = await run('kubectl', ['--kubeconfig', otherCluster(), '--cache-dir', path.join(scratch, 'cache'), 'get', '--raw', '/version'], {
    HTTPS_PROXY: `http://${proxy.http}`,
  });
  if (r === undefined) return t.skip('kubectl not on PATH: the client-go check is skipped');
  assert.notEqual(r.code, 0);
  const why = 'cluster route sim: apiserver-b.clusters.svc: there is no namespace "clusters"';
  assert.ok(r.stderr.includes(`Bad Gateway (kubectl-proxyout: cannot connect to apiserver-b.clusters.svc:443: ${why})`), r.stderr);
});

test('an absolute-form request refused: wget and the status line say why, the body too', async (t) => {
  const raw = await run('curl', ['-sS', '-i', '-x', `http://${proxy.http}`, 'http://nope.shop/']);
  assert.ok(raw, 'curl is part of the CI installs');
  assert.ok(raw.stdout.startsWith(`HTTP/1.1 502 Bad Gateway (kubectl-proxyout: ${noService('nope')})\r\n`), raw.stdout);
  assert.ok(raw.stdout.endsWith(`\r\n\r\nkubectl-proxyout: ${noService('nope')}\n`), raw.stdout);
  const r = await run('wget', ['-O', '-', 'http://nope.shop/'], { http_proxy: `http://${proxy.http}` });
  if (r === undefined) return t.skip('wget not on PATH');
  assert.ok(r.stderr.includes(`ERROR 502: Bad Gateway (kubectl-proxyout: ${noService('nope')}).`), r.stderr);
});

test('an HTTP client pointed at the SOCKS port (HTTPS_PROXY=http://…:1080) is told to use socks5h:// in the status line', async (t) => {
  const hint = `an HTTP request reached the SOCKS listener: use socks5h://${proxy.socks} as the proxy, or an HTTP listener (--listen-http)`;
  const nc = await run('nc', ['-X', 'connect', '-x', proxy.socks!, '-w', '10', 'web.shop', '8080']);
  if (nc === undefined) return t.skip('nc not on PATH (netcat-openbsd)');
  assert.ok(nc.stderr.includes(`HTTP/1.1 400 Bad Request (kubectl-proxyout: ${hint})`), `nc's stderr: ${nc.stderr}`);
  // Not the cluster's own loopback server: Go never sends loopback through a proxy.
  const r = await run('kubectl', ['--kubeconfig', otherCluster(), '--cache-dir', path.join(scratch, 'cache'), 'get', '--raw', '/version'], {
    HTTPS_PROXY: `http://${proxy.socks}`,
  });
  if (r === undefined) return t.skip('kubectl not on PATH: the client-go check is skipped');
  assert.ok(r.stderr.includes(`Bad Request (kubectl-proxyout: ${hint})`), r.stderr);
});
