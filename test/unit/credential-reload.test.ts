// A route whose credentials are refused, or whose API server cannot be reached, is made anew when
// the kubeconfig holds other entries for its context; entries that were tried and failed are not
// tried again (a reload every few seconds, each a new route against the API server) until they
// are edited once more.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { ownKubeconfig, reloadOnNewCredentials } from '../../src/proxy/credential-reload.js';
import { createLogger } from '../../src/core/log.js';
import { contextFingerprint } from '../../src/cluster/kubeconfig-files.js';
import type { BuiltTable } from '../../src/proxy/build-table.js';

const kubeconfig = (token: string, server = 'https://127.0.0.1:6443') =>
  `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "${server}"}}]\nusers: [{name: u, user: {token: ${token}}}]\ncontexts: [{name: ctx, context: {cluster: c, user: u}}]\ncurrent-context: ctx\n`;

test('refused credentials: made anew once per edit of the kubeconfig, not again while the same entries fail', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-credential-reload-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config');
  writeFileSync(file, kubeconfig('old'));
  let refused = true;
  const built = {
    table: { routes: [{ name: 'r', kind: 'cluster', context: 'ctx' }] },
    routes: new Map([['r', { guest: { credentialsRefused: () => refused, apiUnreachable: () => false } }]]),
    settings: { kubeconfig: file },
    kubeconfigs: new Map([['r', 'as built']]),
  } as unknown as BuiltTable;
  let reloads = 0;
  const watcher = reloadOnNewCredentials(
    () => built,
    ownKubeconfig(
      () => built,
      async () => {
        reloads++;
        throw new Error('refused again');
      },
    ),
    createLogger('silent'),
    10,
    50,
  );
  t.after(() => watcher.stop());
  // Waited for, then given more checks (every 10 ms) to be tried again in: a busy machine's late
  // timers must not pass for "tried once".
  const reached = async (n: number) => {
    for (const deadline = Date.now() + 5_000; reloads < n && Date.now() < deadline;) await delay(10);
    await delay(150);
  };
  await reached(1);
  assert.equal(reloads, 1, 'the new entries tried once; they fail, and are not tried again');
  writeFileSync(file, kubeconfig('newer'));
  await reached(2);
  assert.equal(reloads, 2, 'edited again: tried again');
  refused = false;
  writeFileSync(file, kubeconfig('newest'));
  await delay(150);
  assert.equal(reloads, 2, 'credentials taken: the kubeconfig is not looked at');
});

test('an API server that cannot be reached: made anew once the kubeconfig names it elsewhere, again after a while if that failed, never while it is reached', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-credential-reload-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config');
  writeFileSync(file, kubeconfig('t'));
  let unreachable = false;
  const built = {
    table: { routes: [{ name: 'r', kind: 'cluster', context: 'ctx' }] },
    routes: new Map([['r', { guest: { credentialsRefused: () => false, apiUnreachable: () => unreachable } }]]),
    settings: { kubeconfig: file },
    kubeconfigs: new Map([['r', contextFingerprint(file, 'ctx')]]),
  } as unknown as BuiltTable;
  let reloads = 0;
  const watcher = reloadOnNewCredentials(
    () => built,
    ownKubeconfig(
      () => built,
      async () => {
        reloads++;
        throw new Error('its new address does not answer yet');
      },
    ),
    createLogger('silent'),
    10,
    200,
  );
  t.after(() => watcher.stop());
  writeFileSync(file, kubeconfig('t', 'https://127.0.0.1:7443'));
  await delay(150);
  assert.equal(reloads, 0, 'reached: an edited kubeconfig waits for a reload');
  unreachable = true;
  for (const deadline = Date.now() + 5_000; reloads < 1 && Date.now() < deadline;) await delay(10);
  await delay(150);
  assert.equal(reloads, 1, 'unreachable, and the kubeconfig names it elsewhere: made anew once (it failed)');
  for (const deadline = Date.now() + 5_000; reloads < 2 && Date.now() < deadline;) await delay(10);
  assert.equal(reloads, 2, 'the same entries tried again after a while: the new address may answer by then');
});
