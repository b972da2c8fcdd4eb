// api-reachability.ts and the route's health (routes/guest-cluster/health.ts): what a route decides
// on must be the freshest evidence. A probe sent while the API server was away can fail after
// something else (a port-forward) got an answer, and a health check can be a second old.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { scratchDir } from '../helpers/scratch-dir.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { runExecPluginsWithoutStdin } from '../../src/cluster/exec-credential.js';
import { ApiReachability } from '../../src/cluster/api-reachability.js';
import type { ClusterCache } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { RouteHealth } from '../../src/routes/guest-cluster/health.js';
import { eventually } from '../helpers/cluster.js';
import { sendStatus, startFakeApi } from '../helpers/fake-api.js';
import { SimPki } from '../sim/pki.js';
import { KubeConfig } from '@kubernetes/client-node';

/** A fake API server whose /readyz requests are held until reset(): then their connections are reset (no HTTP answer). */
async function heldReadyz(): Promise<{ api: ApiConnection; probes: () => number; reset(): void; close(): Promise<void> }> {
  const held: http.ServerResponse[] = [];
  const fake = await startFakeApi((url, res) => (url.pathname === '/readyz' ? held.push(res) : sendStatus(res, 404, 'not found')));
  return {
    api: fake.api,
    probes: () => fake.requests.filter((u) => u.pathname === '/readyz').length,
    reset() {
      for (const res of held.splice(0)) res.socket?.destroy();
    },
    close: () => fake.close(),
  };
}

test('a probe that fails after an answer seen meanwhile does not mark the server away', async (t) => {
  const s = await heldReadyz();
  t.after(() => s.close());
  const reach = new ApiReachability(s.api, 60_000);
  reach.suspect(); // a dead tunnel: probe now
  await eventually(async () => s.probes() === 1, 5_000, 10);
  // Meanwhile a port-forward opened through the server (routes/cluster/route.ts).
  await new Promise((r) => setTimeout(r, 5));
  reach.sawAnswer();
  s.reset();
  // The stale failure is dropped; a fresh one (sent after the answer) still counts.
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual([reach.last?.answered, reach.last?.serving], [true, true], 'the answer seen after the probe was sent stands');
  reach.suspect();
  await eventually(async () => s.probes() === 2, 5_000, 10);
  s.reset();
  await eventually(async () => reach.last?.answered === false, 5_000, 10);
  assert.equal(reach.last?.serving, false);
});

test('a route degraded because its API server did not answer serves again at the next stream once it answers, not at the next check', async (t) => {
  const s = await heldReadyz();
  t.after(() => s.close());
  const api = s.api;
  const reach = ApiReachability.of(api);
  const health = new RouteHealth('cluster', api, 'https://api.test', { failingWatches: () => [] } as unknown as ClusterCache, createLogger('silent'));
  reach.suspect();
  await eventually(async () => s.probes() === 1, 5_000, 10);
  s.reset();
  await eventually(async () => reach.last?.answered === false, 5_000, 10);
  assert.equal(health.check()?.unreachable, true, 'degraded: no answer');
  // A port-forward opens (the server is back) before the once-a-second check runs again.
  reach.sawAnswer();
  assert.equal(health.current?.unreachable, true, 'the last check still says so');
  const before = Date.now();
  assert.equal(health.currentRechecked(), undefined, 'what a new stream reads (routes/cluster/route.ts open())');
  assert.equal(health.current, undefined);
  assert.ok((health.recoveredAt ?? 0) >= before, 'it serves again since now, for the route\'s "since"');
});

/** What kube-apiserver v1.37.2's /readyz answered (500, text/plain) a second after its restart. */
const READYZ_STARTING = `[+]ping ok
[+]log ok
[-]etcd failed: reason withheld
[+]etcd-readiness ok
[-]informer-sync failed: reason withheld
[+]poststarthook/start-apiserver-admission-initializer ok
[-]poststarthook/start-apiextensions-controllers failed: reason withheld
[-]poststarthook/crd-informer-synced failed: reason withheld
[+]poststarthook/start-system-namespaces-controller ok
[-]poststarthook/rbac/bootstrap-roles failed: reason withheld
[+]shutdown ok
readyz check failed
`;

test('a server that answers /readyz 500 is degraded with the failed checks as the reason, not its first line', async (t) => {
  const fake = await startFakeApi((url, res) => {
    if (url.pathname !== '/readyz') return sendStatus(res, 404, 'not found');
    res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(READYZ_STARTING);
  });
  t.after(() => fake.close());
  const health = new RouteHealth('cluster', fake.api, 'https://api.test', { failingWatches: () => [] } as unknown as ClusterCache, createLogger('silent'));
  ApiReachability.of(fake.api).suspect();
  await eventually(async () => ApiReachability.of(fake.api).last?.serving === false, 5_000, 10);
  const degraded = health.check();
  assert.equal(degraded?.unreachable, false, 'it answers: degraded, not down');
  assert.equal(
    degraded?.reason,
    'the API server https://api.test is not serving: readyz check failed: etcd, informer-sync, poststarthook/start-apiextensions-controllers and 2 more',
  );
});

test('a ready route probes a server it has not heard from, so one that hung shows degraded within seconds', async (t) => {
  let hang = false;
  const held: http.ServerResponse[] = [];
  const fake = await startFakeApi((url, res) => {
    if (url.pathname !== '/readyz') return sendStatus(res, 404, 'not found');
    if (hang) return void held.push(res); // a stopped server: the connection is taken, nothing comes back
    res.end('ok');
  });
  t.after(async () => {
    for (const res of held) res.socket?.destroy();
    await fake.close();
  });
  const probes = () => fake.requests.filter((u) => u.pathname === '/readyz').length;
  const health = new RouteHealth('cluster', fake.api, 'https://api.test', { failingWatches: () => [] } as unknown as ClusterCache, createLogger('silent'), 300);
  health.start();
  t.after(() => health.stop());
  await eventually(async () => probes() >= 2, 5_000, 20);
  assert.equal(health.check(), undefined, 'a server that answers: serving');
  const quiet = probes();
  await new Promise((r) => setTimeout(r, 150));
  assert.ok(probes() <= quiet + 1, 'no more than one probe per quiet period');
  hang = true;
  await eventually(async () => health.current?.unreachable === true, 10_000, 50);
  // Our deadline said as such, not Node's "The operation was aborted".
  assert.equal(health.current!.reason, 'the API server https://api.test does not answer: no answer within 3 s');
  hang = false;
  for (const res of held.splice(0)) res.socket?.destroy();
  await eventually(async () => health.current === undefined, 10_000, 50);
});

test('an idle route whose exec credential expires and whose plugin now fails shows degraded, without a stream to tell it', async (t) => {
  const fake = await startFakeApi((url, res) => (url.pathname === '/readyz' ? res.end('ok') : sendStatus(res, 404, 'not found')));
  t.after(() => fake.close());
  const dir = scratchDir('proxyout-idle-exec-');
  const mode = path.join(dir, 'mode');
  writeFileSync(mode, 'ok');
  // A credential good for 2 s while `mode` says ok; afterwards the SSO session is gone.
  const plugin = path.join(dir, 'plugin.sh');
  writeFileSync(
    plugin,
    [
      '#!/bin/sh',
      `[ "$(cat '${mode}')" = ok ] || { echo 'error: SSO session expired' >&2; exit 1; }`,
      'exp=$(date -u -d @$(( $(date +%s) + 2 )) +%Y-%m-%dT%H:%M:%SZ)',
      'echo "{\\"apiVersion\\":\\"client.authentication.k8s.io/v1\\",\\"kind\\":\\"ExecCredential\\",\\"status\\":{\\"token\\":\\"t\\",\\"expirationTimestamp\\":\\"$exp\\"}}"',
      '',
    ].join('\n'),
  );
  chmodSync(plugin, 0o755);
  const server = fake.api.url('/').origin;
  const file = path.join(dir, 'config');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]`,
      `users: [{name: sso, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: ${plugin}, interactiveMode: Never}}}]`,
      'contexts: [{name: x, context: {cluster: c, user: sso}}]',
      'current-context: x',
      '',
    ].join('\n'),
  );
  const { kc } = loadKubeConfig({ kubeconfig: file });
  runExecPluginsWithoutStdin(kc, undefined, 5_000);
  const api = new ApiConnection(kc, { env: {} });
  const health = new RouteHealth('cluster', api, server, { failingWatches: () => [] } as unknown as ClusterCache, createLogger('silent'), 300);
  health.start();
  t.after(() => health.stop());
  await eventually(async () => fake.requests.some((u) => u.pathname === '/readyz'), 5_000, 20);
  assert.equal(health.check(), undefined, 'serving while the credential is good');
  writeFileSync(mode, 'expired');
  await eventually(async () => health.current !== undefined, 10_000, 50);
  assert.match(health.current!.reason, /SSO session expired/);
});

test('an API server whose certificate the kubeconfig CA does not vouch for (a rotated CA) is said to be so, not to give no answer', async (t) => {
  const served = new SimPki();
  const kubeconfigs = new SimPki();
  const { keyPem, certPem } = served.servingCert();
  const server = https.createServer({ key: keyPem, cert: certPem }, (_req, res) => res.end('ok'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: url, caData: Buffer.from(kubeconfigs.caPem).toString('base64') }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
    currentContext: 'c',
  });
  const api = new ApiConnection(kc);
  const health = new RouteHealth('cluster', api, url, { failingWatches: () => [] } as unknown as ClusterCache, createLogger('silent'));
  ApiReachability.of(api).check();
  await eventually(async () => ApiReachability.of(api).last !== undefined, 5_000, 10);
  const degraded = health.check();
  assert.equal(degraded?.unreachable, true, 'no stream can open');
  assert.match(degraded?.reason ?? '', /presents a certificate the kubeconfig's CA does not vouch for/);
  assert.doesNotMatch(degraded?.reason ?? '', /does not answer/);
});
