// Credentials that take long to come (an SSO plugin waiting for a browser login, a hung plugin,
// an identity provider that does not answer) make the route degraded, naming what is awaited:
// every stream waited for them until its connect timeout while the route said it was ready.
// Streams are still tried (the login may finish), and the route serves again once they come.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import net from 'node:net';
import { once } from 'node:events';
import { scratchDir } from '../helpers/scratch-dir.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { runExecPluginsWithoutStdin } from '../../src/cluster/exec-credential.js';
import type { ClusterCache } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { RouteHealth } from '../../src/routes/guest-cluster/health.js';
import { eventually } from '../helpers/cluster.js';
import { startFakeApi, type FakeApi } from '../helpers/fake-api.js';
import { WebSocketV4Transport } from '../../src/tunnel/websocket-v4.js';

/** An API server that answers, and a kubeconfig whose exec plugin waits while `hold` exists (20 s at most). */
async function slowPlugin(t: TestContext): Promise<{ api: ApiConnection; server: string; fake: FakeApi; hold: string }> {
  const fake = await startFakeApi((_url, res) => res.writeHead(200).end('ok'));
  t.after(() => fake.close());
  const dir = scratchDir('proxyout-credential-wait-');
  const hold = path.join(dir, 'hold');
  // A credential good for 2 s; while `hold` exists the plugin waits (a login under way), 20 s at most.
  const plugin = path.join(dir, 'plugin.sh');
  writeFileSync(
    plugin,
    [
      '#!/bin/sh',
      `i=0; while [ -e '${hold}' ] && [ $i -lt 100 ]; do sleep 0.2; i=$((i + 1)); done`,
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
  runExecPluginsWithoutStdin(kc, undefined, 60_000);
  const api = new ApiConnection(kc, { env: {} });
  return { api, server, fake, hold };
}

test('an exec plugin that does not answer for seconds: the route is degraded naming it, and serves again when it answers', async (t) => {
  const { api, server, fake, hold } = await slowPlugin(t);
  const health = new RouteHealth('cluster', api, server, { failingWatches: () => [] } as unknown as ClusterCache, createLogger('silent'), 300);
  health.start();
  t.after(() => health.stop());
  await eventually(async () => fake.requests.some((u) => u.pathname === '/readyz'), 5_000, 20);
  assert.equal(health.check(), undefined, 'serving while the credential is good');
  writeFileSync(hold, '');
  await eventually(async () => health.current !== undefined, 15_000, 50);
  assert.equal(health.current!.reason, 'waiting for the credentials of context "x": its exec plugin plugin.sh has not answered');
  assert.equal(health.current!.unreachable, false, 'streams are still tried: the login may finish');
  rmSync(hold);
  await eventually(async () => health.current === undefined, 10_000, 50);
});

test('a v4 port-forward whose credentials do not come ends at its deadline, saying what it waited for', async (t) => {
  const { api, hold } = await slowPlugin(t);
  writeFileSync(hold, '');
  t.after(() => rmSync(hold, { force: true }));
  const transport = new WebSocketV4Transport(api, createLogger('silent'), { intervalMs: 0, timeoutMs: 0 });
  const started = Date.now();
  const opened = transport.open({ namespace: 'shop', pod: 'web-0', port: 8080 }, { signal: AbortSignal.timeout(6_000), confirmMs: 0 });
  const outcome = await Promise.race([
    opened.then(
      () => 'opened',
      (err: Error) => err,
    ),
    new Promise((r) => setTimeout(() => r('pending'), 12_000)),
  ]);
  assert.ok(outcome instanceof Error, `still ${String(outcome)} ${Date.now() - started} ms after a 6 s deadline`);
  assert.match(
    outcome.message,
    /^port-forward to shop\/web-0:8080 did not open in time: waiting for the credentials of context "x": its exec plugin plugin\.sh has not answered$/,
  );
});

test('an OIDC refresh that gets no answer is named by its issuer while it is awaited', async (t) => {
  const held = new Set<net.Socket>();
  const silent = net.createServer((s) => {
    held.add(s);
    s.on('error', () => undefined);
  });
  silent.listen(0, '127.0.0.1');
  await once(silent, 'listening');
  t.after(() => {
    for (const s of held) s.destroy();
    silent.close();
  });
  const issuer = `https://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
  const expired = `e30.${Buffer.from(JSON.stringify({ exp: Math.floor(Date.now() / 1000) - 60 })).toString('base64url')}.sig`;
  const file = path.join(scratchDir('proxyout-credential-wait-'), 'config');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]',
      `users: [{name: u, user: {auth-provider: {name: oidc, config: {client-id: k, id-token: "${expired}", refresh-token: r, idp-issuer-url: "${issuer}"}}}}]`,
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
      '',
    ].join('\n'),
  );
  const api = new ApiConnection(loadKubeConfig({ kubeconfig: file }).kc, { env: {} });
  void api.requestOptions().catch(() => undefined);
  await eventually(async () => api.credentialProblem, 10_000, 100);
  assert.equal(api.credentialProblem!.message, `waiting for the credentials of context "x": its OIDC issuer ${issuer} has not answered`);
});
