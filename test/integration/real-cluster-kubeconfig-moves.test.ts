// The cluster's address and CA change under a running proxy, and the user's kubeconfig is
// rewritten for them (`gcloud container clusters get-credentials` after a credential rotation,
// which moves the control plane and renews its CA): kubectl follows at its next run, and so must
// the proxy, by itself, once its API server cannot be reached. First the API server moves (the
// front the kubeconfig named goes away, another port takes its place), then its serving
// certificate comes from a new CA and it restarts (connections open before keep the old one).
// A second proxy's kubeconfig names its CA by file, which is rewritten in place meanwhile; so does
// a managed one's, whose daemon runs from a copy with that CA embedded. Skips with a reason when the real-cluster binaries are not built.
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { httpContainer, manifests, pod, webService } from '../helpers/real-cluster-objects.js';
import { endpointSlicesCaughtUp, startClusterLogged, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { startTcpBalancer, type TcpBalancer } from '../helpers/tcp-balancer.js';
import { curl } from '../helpers/curl.js';
import { connectManaged, managedCli, type Connected } from '../helpers/managed-proxies.js';

const skip = skipUnlessRealCluster();

let cluster: RealCluster | undefined;
let proxy: ProxyProcess | undefined;
/** Its kubeconfig names the CA by file (`caFile`), the server directly. */
let byFile: ProxyProcess | undefined;
let caFile = '';
/** A managed daemon connected with the by-file kubeconfig. */
let managed: Connected | undefined;
let stateDir = '';
let front: TcpBalancer | undefined;
let kubeconfig = '';

/** The admin context with its CA embedded, as cloud CLIs write it. */
const writeKubeconfig = (server: string, caPem: string) =>
  writeFile(
    kubeconfig,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: moving, cluster: {server: "${server}", certificate-authority-data: ${Buffer.from(caPem).toString('base64')}}}]`,
      `users: [{name: admin, user: {token: ${cluster!.tokens.admin}}}]`,
      'contexts: [{name: admin, context: {cluster: moving, user: admin, namespace: shop}}]',
      'current-context: admin',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );

const apiServer = () => ({ host: '127.0.0.1', port: Number(new URL(cluster!.server).port) });

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  await cluster.kubectl(['apply', '-f', '-'], { input: manifests(pod({ name: 'web', containers: [httpContainer('web')] }), webService()) });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/web', '--timeout=60s']);
  await endpointSlicesCaughtUp(cluster);
  front = await startTcpBalancer([apiServer()]);
  kubeconfig = path.join(cluster.dir, 'moving.kubeconfig');
  await writeKubeconfig(`https://127.0.0.1:${front.port}`, await readFile(path.join(cluster.dir, 'pki', 'ca.crt'), 'utf8'));
  const listen = ['--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0'];
  proxy = await startProxyProcess(['--kubeconfig', kubeconfig, ...listen, '--log-level', 'debug']);
  caFile = path.join(cluster.dir, 'by-file-ca.crt');
  await writeFile(caFile, await readFile(path.join(cluster.dir, 'pki', 'ca.crt')));
  const byFileConfig = path.join(cluster.dir, 'by-file.kubeconfig');
  const clusterEntry = `{name: c, cluster: {server: "${cluster.server}", certificate-authority: "${caFile}"}}`;
  await writeFile(
    byFileConfig,
    `apiVersion: v1\nkind: Config\nclusters: [${clusterEntry}]\nusers: [{name: u, user: {token: ${cluster.tokens.admin}}}]\ncontexts: [{name: c, context: {cluster: c, user: u, namespace: shop}}]\ncurrent-context: c\n`,
    { mode: 0o600 },
  );
  byFile = await startProxyProcess(['--kubeconfig', byFileConfig, ...listen, '--log-level', 'debug']);
  stateDir = path.join(cluster.dir, 'state');
  await mkdir(stateDir, { mode: 0o700 });
  managed = await connectManaged(stateDir, byFileConfig);
});

after(async () => {
  if (managed) await managedCli(stateDir).cli(['disconnect', '--all']);
  const proxies = new Map<string, ProxyProcess>();
  if (proxy) proxies.set('moves', proxy);
  if (byFile) proxies.set('by-file', byFile);
  const codes = await stopProxiesAndCluster(cluster, proxies);
  await front?.close();
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

/** Asks web.shop through SOCKS5 and the HTTP proxy until both answer; the ms it took. */
async function servedAgainMs(limitMs: number, through: { socks?: string; http?: string } = proxy!): Promise<number> {
  const t0 = Date.now();
  let last = '';
  while (Date.now() - t0 < limitMs) {
    const socks = await curl(['--socks5-hostname', through.socks!, 'http://web.shop/'], 3_000);
    const http = await curl(['-x', `http://${through.http!}`, 'http://web.shop/'], 3_000);
    if (/^pod=web /.test(socks.stdout) && /^pod=web /.test(http.stdout)) return Date.now() - t0;
    last = `socks: ${socks.code} ${socks.stdout}${socks.stderr}; http: ${http.code} ${http.stdout}`;
    await delay(250);
  }
  throw new Error(`not served again within ${limitMs} ms; last: ${last}`);
}

const renewals = () =>
  proxy!.logs.filter((l) => /cannot reach its API server \(or never started\) and the kubeconfig has new entries/.test(String(l.msg))).length;

test('the API server moves to another address: the proxy follows the rewritten kubeconfig', { timeout: 30_000 }, async (t: TestContext) => {
  if (skip) return t.skip(skip);
  await servedAgainMs(5_000);
  await front!.close();
  front = await startTcpBalancer([apiServer()]);
  await writeKubeconfig(`https://127.0.0.1:${front.port}`, await readFile(path.join(cluster!.dir, 'pki', 'ca.crt'), 'utf8'));
  console.log(`# served again ${await servedAgainMs(15_000)} ms after the move`);
  assert.equal(renewals(), 1, 'the proxy says why it made the route anew');
});

test(
  'the API server serves from a new CA after a restart: the proxies trust the rewritten kubeconfig and CA file',
  { timeout: 40_000 },
  async (t: TestContext) => {
    if (skip) return t.skip(skip);
    await servedAgainMs(5_000);
    await servedAgainMs(5_000, byFile);
    await servedAgainMs(5_000, managed);
    const caPem = await cluster!.rotateServingCa();
    await writeKubeconfig(`https://127.0.0.1:${front!.port}`, caPem);
    await writeFile(caFile, caPem);
    await cluster!.restartApiServer();
    console.log(`# served again ${await servedAgainMs(15_000)} ms after the restart`);
    assert.equal(renewals(), 2, 'made anew with the new CA');
    // Its kubeconfig did not change: the CA file is read again once the certificate is refused (not a minute later).
    console.log(`# the proxy with a CA file served again ${await servedAgainMs(15_000, byFile)} ms after that`);
    // Its daemon's copy embedded the old CA: it takes the file's new one by itself.
    console.log(`# the managed proxy served again ${await servedAgainMs(15_000, managed)} ms after that`);
  },
);
