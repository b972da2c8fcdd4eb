// Exec credential plugins in a proxy that runs all day: the credential a plugin gave is asked for
// again when the API server refuses it (client-go plugin/pkg/client/auth/exec/exec.go: a 401
// makes the next request run the plugin), not kept until its expirationTimestamp.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { SimCluster } from '../sim/cluster.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { runExecPluginsWithoutStdin } from '../../src/cluster/exec-credential.js';
import { Writable } from 'node:stream';
import { ApiConnection, ApiStatusError } from '../../src/cluster/api.js';
import { ClusterCache } from '../../src/cluster/cache.js';
import { PodLookup } from '../../src/cluster/pod-lookup.js';
import { createLogger } from '../../src/core/log.js';

let sim: SimCluster;
let dir: string;
before(async () => {
  sim = await SimCluster.start({ quiet: true });
  dir = await mkdtemp(path.join(tmpdir(), 'exec-refresh-'));
});
after(async () => {
  await sim?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** A kubeconfig whose exec plugin prints the token in `tokenFile` (valid for a day) and logs each run. */
async function pluginKubeconfig(
  name: string,
  script: (tokenFile: string, runs: string) => string,
): Promise<{ kubeconfig: string; tokenFile: string; runs: string }> {
  const tokenFile = path.join(dir, `${name}.token`);
  const runs = path.join(dir, `${name}.runs`);
  const plugin = path.join(dir, `${name}.sh`);
  await writeFile(runs, '');
  await writeFile(plugin, script(tokenFile, runs));
  await chmod(plugin, 0o700);
  const doc = yaml.load(sim.kubeconfigYaml({ auth: 'exec' })) as { users: Array<{ user: { exec: { command: string; args?: string[]; env?: unknown } } }> };
  Object.assign(doc.users[0]!.user.exec, { command: plugin, args: [], env: null });
  const kubeconfig = path.join(dir, `${name}.kubeconfig`);
  await writeFile(kubeconfig, yaml.dump(doc), { mode: 0o600 });
  return { kubeconfig, tokenFile, runs };
}

const printsToken = (tokenFile: string, runs: string) =>
  `#!/bin/sh\necho run >> '${runs}'\n` +
  `printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"2099-01-01T00:00:00Z"}}\\n' "$(cat '${tokenFile}')"\n`;

const runCount = async (runs: string) => (await readFile(runs, 'utf8')).split('\n').filter(Boolean).length;

test('a 401 makes the next request run the exec plugin again, though its credential has not expired', async () => {
  const { kubeconfig, tokenFile, runs } = await pluginKubeconfig('refresh', printsToken);
  // The plugin's token is revoked (or the cluster was re-created) long before its expiry.
  await writeFile(tokenFile, 'revoked-token');
  const api = new ApiConnection(loadKubeConfig({ kubeconfig }).kc);
  await assert.rejects(api.getJson('/api/v1/namespaces'), (err: unknown) => err instanceof ApiStatusError && err.statusCode === 401);
  // The plugin now hands out a good token (the user logged in again; kubectl works at once).
  await writeFile(tokenFile, sim.issueToken());
  const list = await api.getJson<{ kind: string }>('/api/v1/namespaces');
  assert.equal(list.kind, 'NamespaceList');
  assert.equal(await runCount(runs), 2, 'the plugin ran once per credential');
});

test('a credential without expirationTimestamp is kept until the API server refuses it, as client-go keeps it', async () => {
  const noExpiry = (tokenFile: string, runs: string) => printsToken(tokenFile, runs).replace(',"expirationTimestamp":"2099-01-01T00:00:00Z"', '');
  const { kubeconfig, tokenFile, runs } = await pluginKubeconfig('no-expiry', noExpiry);
  await writeFile(tokenFile, 'revoked-token');
  const { kc } = loadKubeConfig({ kubeconfig });
  await assert.rejects(new ApiConnection(kc).getJson('/api/v1/namespaces'), (err: unknown) => err instanceof ApiStatusError && err.statusCode === 401);
  await writeFile(tokenFile, sim.issueToken());
  const api = new ApiConnection(kc);
  assert.equal((await api.getJson<{ kind: string }>('/api/v1/namespaces')).kind, 'NamespaceList');
  assert.equal(await runCount(runs), 2, 'run again after the 401');
  // Options worked out again (another connection; a minute later): the credential is still good.
  assert.equal((await new ApiConnection(kc).getJson<{ kind: string }>('/api/v1/namespaces')).kind, 'NamespaceList');
  assert.equal(await runCount(runs), 2, 'not run again for a credential the server takes');
});

test('requests that start together run the plugin once, not once each (client-go holds one credential behind a lock)', async () => {
  const slow = (tokenFile: string, runs: string) => printsToken(tokenFile, runs).replace('\n', '\nsleep 0.3\n');
  const { kubeconfig, tokenFile, runs } = await pluginKubeconfig('together', slow);
  await writeFile(tokenFile, sim.issueToken());
  // A proxy starting (its watches and first streams) or a burst of streams after a 401.
  const api = new ApiConnection(loadKubeConfig({ kubeconfig }).kc);
  const lists = await Promise.all(Array.from({ length: 8 }, () => api.getJson<{ kind: string }>('/api/v1/namespaces')));
  assert.ok(lists.every((l) => l.kind === 'NamespaceList'));
  assert.equal(await runCount(runs), 1);
  api.invalidate();
  await Promise.all(Array.from({ length: 8 }, () => api.getJson('/api/v1/namespaces')));
  assert.equal(await runCount(runs), 2);
});

test('the plugin gets no open stdin: one that reads it sees end-of-file at once, as under kubectl without a terminal', async () => {
  // client-go gives a non-interactive plugin no stdin (exec.go: cmd.Stdin only when interactive);
  // an open pipe nobody writes to would hold a plugin that asks for input for ever.
  const asks = (tokenFile: string, runs: string) =>
    printsToken(tokenFile, runs).replace('\n', "\nread -r answer || echo 'no terminal: skipping the prompt' >&2\n");
  const { kubeconfig, tokenFile, runs } = await pluginKubeconfig('stdin', asks);
  await writeFile(tokenFile, sim.issueToken());
  const api = new ApiConnection(loadKubeConfig({ kubeconfig }).kc);
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error('the plugin was still waiting for stdin after 5 s')), 5_000)));
  try {
    const list = await Promise.race([api.getJson<{ kind: string }>('/api/v1/namespaces'), hung]);
    assert.equal(list.kind, 'NamespaceList');
  } finally {
    clearTimeout(timer);
  }
  assert.equal(await runCount(runs), 1);
});

test("a plugin's stderr reaches a terminal while it runs: a device-code prompt is seen before the login completes", async () => {
  const prompt = 'To sign in, open https://login.example/device and enter the code ABCD-EFGH';
  // The plugin completes its login only once the prompt has been seen (the user entered the
  // code): a prompt shown only after the plugin exits would never let it finish.
  const entered = path.join(dir, 'device-code.entered');
  const deviceCode = (tokenFile: string, runs: string) =>
    printsToken(tokenFile, runs).replace(
      '\n',
      `\necho '${prompt}' >&2\nfor i in $(seq 100); do [ -f '${entered}' ] && break; sleep 0.1; done\n[ -f '${entered}' ] || exit 1\n`,
    );
  const { kubeconfig, tokenFile } = await pluginKubeconfig('device-code', deviceCode);
  await writeFile(tokenFile, sim.issueToken());
  const { kc } = loadKubeConfig({ kubeconfig });
  // What the proxy does when its stderr is a terminal (the foreground proxy run by a person).
  let shown = '';
  const terminal = new Writable({
    write: (chunk: Buffer, _e, done) => {
      shown += chunk.toString();
      if (shown.includes(prompt)) void writeFile(entered, '').then(() => done());
      else done();
    },
  });
  runExecPluginsWithoutStdin(kc, terminal);
  const list = await new ApiConnection(kc).getJson<{ kind: string }>('/api/v1/namespaces');
  assert.equal(list.kind, 'NamespaceList');
  assert.equal(shown.trim(), prompt);
});

test('a plugin that prints a raw token instead of an ExecCredential: the error says so without quoting its output', async () => {
  const { kubeconfig } = await pluginKubeconfig('raw', () => '#!/bin/sh\necho s3cr3tT0kenValue0123456789\n');
  const api = new ApiConnection(loadKubeConfig({ kubeconfig }).kc);
  await assert.rejects(api.getJson('/api/v1/namespaces'), (err: Error) => {
    assert.doesNotMatch(err.message, /s3cr3t/, 'no part of the plugin output in the message');
    assert.match(err.message, /exec credential plugin printed something that is not an ExecCredential JSON object/);
    return true;
  });
});

test('a namespace first looked up after the credential was revoked is watched with a fresh one, not refused with 401', async () => {
  // Namespace-scoped rights: the cache watches namespaces on demand, each with a new list.
  const { kubeconfig, tokenFile, runs } = await pluginKubeconfig('on-demand', printsToken);
  const scoped = { namespaces: ['default', 'kube-system'] };
  const first = sim.issueToken(scoped);
  await writeFile(tokenFile, first);
  const cache = new ClusterCache(new ApiConnection(loadKubeConfig({ kubeconfig }).kc), createLogger('silent'), 'default');
  try {
    await cache.start();
    assert.equal(cache.status().scope, 'namespaces');
    // The token is revoked (expired, rotated); the plugin has a new one for its next run.
    sim.revokeToken(first);
    await writeFile(tokenFile, sim.issueToken(scoped));
    await cache.ensureNamespace('kube-system');
    assert.ok(cache.status().namespaces.includes('kube-system'));
    assert.equal(await runCount(runs), 2);
  } finally {
    await cache.stop();
  }
});

test('a pod look-up made after the credential was revoked asks again with a fresh one, not failing with 401', async () => {
  const { kubeconfig, tokenFile, runs } = await pluginKubeconfig('pod-lookup', printsToken);
  const first = sim.issueToken();
  await writeFile(tokenFile, first);
  const api = new ApiConnection(loadKubeConfig({ kubeconfig }).kc);
  await api.getJson('/api');
  sim.revokeToken(first);
  await writeFile(tokenFile, sim.issueToken());
  // A Pod IP or pod name without pods watched: one look-up, answered (none there), not Unauthorized.
  assert.equal(await new PodLookup(api, createLogger('silent'), () => undefined).byName('default', 'no-such-pod'), undefined);
  assert.equal(await runCount(runs), 2);
});
