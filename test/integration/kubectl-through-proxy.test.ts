// The real kubectl through the proxy to a second cluster whose API server is reachable only
// inside the first (a private cluster's API server as a Service there): the kubeconfig's
// `proxy-url: socks5://…` (kubectl refuses socks5h, and its socks5 sends the name anyway), and
// HTTPS_PROXY=http://… (CONNECT). API requests, and `kubectl port-forward`'s upgraded SPDY
// tunnel through the proxy's tunnel, 1 MiB echoed intact.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { SimCluster } from '../sim/cluster.js';
import { SAMPLE, seedSampleCluster } from '../sim/sample.js';

const kubectl = (process.env.PATH ?? '')
  .split(path.delimiter)
  .map((d) => path.join(d, 'kubectl'))
  .find((p) => existsSync(p));
const SKIP = 'kubectl not on PATH: kubectl through the proxy is not checked';

let first: TestCluster;
let second: SimCluster;
let proxy: ProxyProcess;
let scratch: string;
const NO_PROXY_ENV = { NO_PROXY: '', no_proxy: '', HTTPS_PROXY: '', https_proxy: '', HTTP_PROXY: '', http_proxy: '', ALL_PROXY: '', all_proxy: '' };

before(async () => {
  if (!kubectl) return;
  first = await startTestCluster();
  second = await SimCluster.start({ quiet: true, podIpStart: '127.20.0.2', clusterIpStart: '127.97.0.10' });
  await seedSampleCluster(second);
  // The second cluster's API server as a pod of the first, behind Service clusters/apiserver-b.
  await first.sim.createNamespace('clusters');
  const api = new URL(second.server);
  await first.sim.createPod({
    namespace: 'clusters',
    name: 'apiserver-b-0',
    labels: { app: 'apiserver-b' },
    ports: [{ name: 'https', containerPort: 6443, backend: 'external', target: { host: api.hostname, port: Number(api.port) } }],
  });
  await first.sim.createService({ namespace: 'clusters', name: 'apiserver-b', selector: { app: 'apiserver-b' }, ports: [{ port: 443, targetPort: 6443 }] });
  proxy = await startProxyProcess(['--kubeconfig', first.kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0']);
  scratch = mkdtempSync(path.join(tmpdir(), 'proxyout-kubectl-'));
});

after(async () => {
  if (!kubectl) return;
  await proxy?.stop();
  await second?.stop();
  await first?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** A kubeconfig for the second cluster, its server named as the first cluster's Service. */
function secondKubeconfig(name: string, proxyUrl?: string): string {
  const server = 'https://apiserver-b.clusters.svc:443';
  // The simulator's serving certificate names localhost, not the Service.
  const extra = `    tls-server-name: "localhost"\n${proxyUrl ? `    proxy-url: "${proxyUrl}"\n` : ''}`;
  const yaml = second.kubeconfigYaml({ server, namespace: 'shop' }).replace(`    server: "${server}"\n`, (line) => line + extra);
  assert.ok(yaml.includes('tls-server-name'), yaml);
  const file = path.join(scratch, name);
  writeFileSync(file, yaml, { mode: 0o600 });
  return file;
}

function runKubectl(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(kubectl!, args, { timeout: 60_000, env: { ...process.env, ...NO_PROXY_ENV, HOME: scratch, ...env } }, (err, stdout, stderr) =>
      resolve({ code: err ? 1 : 0, stdout, stderr }),
    ),
  );
}

const podIPs = ['get', 'pods', '-n', 'shop', '-o', 'jsonpath={.items[*].status.podIP}'];

test("kubectl with proxy-url socks5:// lists the second cluster's pods", async (t) => {
  if (!kubectl) return t.skip(SKIP);
  const r = await runKubectl(['--kubeconfig', secondKubeconfig('socks', `socks5://${proxy.socks}`), ...podIPs]);
  assert.equal(r.code, 0, r.stderr);
  const ips = r.stdout.trim().split(' ');
  assert.equal(ips.length, SAMPLE.web.pods.length + SAMPLE.api.pods.length + SAMPLE.db.pods.length, r.stdout);
  assert.ok(
    ips.every((ip) => ip.startsWith('127.20.')),
    `the second cluster's Pod IPs: ${r.stdout}`,
  );
});

test("kubectl with HTTPS_PROXY=http://… (CONNECT) lists the second cluster's pods", async (t) => {
  if (!kubectl) return t.skip(SKIP);
  const r = await runKubectl(['--kubeconfig', secondKubeconfig('connect'), ...podIPs], { HTTPS_PROXY: `http://${proxy.http}` });
  assert.equal(r.code, 0, r.stderr);
  assert.ok(
    r.stdout
      .trim()
      .split(' ')
      .every((ip) => ip.startsWith('127.20.')),
    r.stdout,
  );
});

test("kubectl port-forward through proxy-url socks5:// carries 1 MiB to the second cluster's pod and back", async (t) => {
  if (!kubectl) return t.skip(SKIP);
  const kubeconfig = secondKubeconfig('socks-pf', `socks5://${proxy.socks}`);
  const pf = spawn(kubectl, ['--kubeconfig', kubeconfig, '-n', 'data', 'port-forward', `pod/${SAMPLE.echo.pods[0]}`, ':7000', '--address', '127.0.0.1'], {
    env: { ...process.env, ...NO_PROXY_ENV, HOME: scratch },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  pf.stdout.on('data', (c: Buffer) => (out += c));
  pf.stderr.on('data', (c: Buffer) => (out += c));
  t.after(async () => {
    if (pf.exitCode === null && pf.signalCode === null) {
      pf.kill('SIGTERM');
      await once(pf, 'exit');
    }
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kubectl port-forward did not start:\n${out}`)), 30_000);
    pf.stdout.on('data', () => {
      const m = /Forwarding from 127\.0\.0\.1:(\d+) ->/.exec(out);
      if (m) resolve(Number(m[1]));
      if (m) clearTimeout(timer);
    });
    pf.once('exit', (code) => reject(new Error(`kubectl exited with ${code}:\n${out}`)));
  });
  const data = randomBytes(1 << 20);
  const back = await new Promise<Buffer>((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    let n = 0;
    s.on('data', (d: Buffer) => {
      got.push(d);
      n += d.length;
      if (n >= data.length) {
        s.end();
        resolve(Buffer.concat(got));
      }
    });
    s.on('error', reject);
    s.on('close', () => n < data.length && reject(new Error(`closed after ${n} of ${data.length} bytes:\n${out}`)));
    s.end(data);
  });
  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  assert.equal(sha(back), sha(data));
});
