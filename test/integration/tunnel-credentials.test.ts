// A port-forward opened after the API server stopped taking the credential (a token rotated or
// revoked; an exec plugin has a new one) is opened again with the fresh credential instead of
// failing the client's stream once: seen with a real kube-apiserver and `kubectl create token`
// tokens under --transport spdy and websocket (auto got there by its WebSocket fallback). A
// credential that comes back the same (a static token) is not asked with again.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import yaml from 'js-yaml';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { createLogger } from '../../src/core/log.js';
import { SpdyTransport } from '../../src/tunnel/spdy-transport.js';
import { WebSocketV4Transport } from '../../src/tunnel/websocket-v4.js';
import type { PodPort, Transport } from '../../src/tunnel/transport.js';
import { SAMPLE } from '../sim/sample.js';

let cluster: TestCluster;
const echo: PodPort = { namespace: 'data', pod: SAMPLE.echo.pods[0], port: 7000 };
const quiet = { intervalMs: 0, timeoutMs: 0 };

before(async () => {
  cluster = await startTestCluster();
});
after(async () => {
  await cluster?.close();
});

/** An API connection whose exec plugin prints the token in a file, and that file. */
async function pluginApi(name: string): Promise<{ api: ApiConnection; tokenFile: string }> {
  const tokenFile = path.join(cluster.dir, `${name}.token`);
  const plugin = path.join(cluster.dir, `${name}.sh`);
  await writeFile(
    plugin,
    `#!/bin/sh\nprintf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$(cat '${tokenFile}')"\n`,
  );
  await chmod(plugin, 0o700);
  const doc = yaml.load(cluster.sim.kubeconfigYaml({ auth: 'exec' })) as { users: Array<{ user: { exec: Record<string, unknown> } }> };
  Object.assign(doc.users[0]!.user.exec, { command: plugin, args: [], env: null });
  const kubeconfig = path.join(cluster.dir, `${name}.kubeconfig`);
  await writeFile(kubeconfig, yaml.dump(doc), { mode: 0o600 });
  return { api: new ApiConnection(loadKubeConfig({ kubeconfig }).kc), tokenFile };
}

const transports: Record<string, (api: ApiConnection) => Transport> = {
  spdy: (api) => new SpdyTransport(api, createLogger('silent'), { keepalive: quiet }),
  websocket: (api) => new WebSocketV4Transport(api, createLogger('silent'), quiet),
};

async function roundTrip(s: Duplex, text: string): Promise<string> {
  const back = new Promise<string>((resolve, reject) => {
    s.once('data', (d: Buffer) => resolve(d.toString()));
    s.once('error', reject);
  });
  s.write(text);
  return back;
}

const open = (t: Transport) => t.open(echo, { signal: AbortSignal.timeout(5_000), confirmMs: 0 });

for (const [name, make] of Object.entries(transports)) {
  test(`${name}: a stream opened after the token was revoked is opened with the plugin's new one`, async () => {
    const { api, tokenFile } = await pluginApi(`revoked-${name}`);
    const first = cluster.sim.issueToken();
    await writeFile(tokenFile, first);
    const before = make(api);
    (await open(before)).destroy();
    await before.close();
    cluster.sim.revokeToken(first);
    await writeFile(tokenFile, cluster.sim.issueToken());
    // A new tunnel (SPDY) or WebSocket, with the options the API connection still holds.
    const after = make(api);
    try {
      const s = await open(after);
      assert.equal(await roundTrip(s, 'hello'), 'hello');
      s.destroy();
    } finally {
      await after.close();
    }
  });

  test(`${name}: a refused token that comes back the same is not sent again`, async () => {
    const { api, tokenFile } = await pluginApi(`same-${name}`);
    await writeFile(tokenFile, 'never-valid');
    const t = make(api);
    cluster.sim.resetCounters();
    try {
      await assert.rejects(open(t), /401/);
      assert.equal(cluster.sim.counters.portForward, 1);
    } finally {
      await t.close();
    }
  });
}

test('a static token the API server refuses is reported (route status: degraded, why) until a request is taken again', async () => {
  const token = cluster.sim.issueToken();
  const file = path.join(cluster.dir, 'static.kubeconfig');
  await cluster.sim.writeKubeconfig(file, { token, context: 'static' });
  const api = new ApiConnection(loadKubeConfig({ kubeconfig: file }).kc);
  const reported = () => api.credentialProblem;
  await api.getJson('/api');
  assert.equal(reported(), undefined);
  cluster.sim.revokeToken(token);
  const t = transports.spdy!(api);
  try {
    await assert.rejects(open(t), /401/);
    await api.requestOptions();
    const problem = reported();
    assert.equal(problem?.refused, true);
    assert.match(
      problem.message,
      /^the API server refuses the credentials of context "static" \(user "[^"]+", 401 Unauthorized\): log in again or renew the token$/,
    );
    // Taken again (the revocation undone): the problem is gone with the first answer.
    cluster.sim.issueToken({ token });
    (await open(t)).destroy();
    assert.equal(reported(), undefined);
  } finally {
    await t.close();
  }
});

test("a plugin that hands out a new token at each run, each refused (a lapsed login): reported until one is taken, not cleared by the next run's token", async () => {
  const { api, tokenFile } = await pluginApi('lapsed');
  const reported = () => api.credentialProblem;
  const dead = `${tokenFile}.dead`;
  const plugin = path.join(cluster.dir, 'lapsed.sh');
  await writeFile(
    plugin,
    `#!/bin/sh\nif [ -e '${dead}' ]; then t="dead-$(date +%s%N)"; else t="$(cat '${tokenFile}')"; fi\nprintf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$t"\n`,
  );
  const token = cluster.sim.issueToken();
  await writeFile(tokenFile, token);
  await api.getJson('/api');
  assert.equal(reported(), undefined);
  await writeFile(dead, '');
  cluster.sim.revokeToken(token);
  await assert.rejects(api.getJson('/api'), /401|Unauthorized/);
  // The plugin runs again and gives another dead token: nothing has taken it, so still refused.
  await api.requestOptions();
  assert.equal(reported()?.refused, true);
  await assert.rejects(api.getJson('/api'), /401|Unauthorized/);
  await api.requestOptions();
  assert.equal(reported()?.refused, true);
  // Logged in again: the first request taken clears it.
  await writeFile(tokenFile, cluster.sim.issueToken());
  await rm(dead);
  api.invalidate();
  await api.getJson('/api');
  assert.equal(reported(), undefined);
});
