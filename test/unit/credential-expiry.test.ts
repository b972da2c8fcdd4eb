// ApiConnection keeps request options for a minute, but never past the credential's own expiry:
// an exec plugin's expirationTimestamp, an OIDC id-token's exp, a token file's next read. Else an
// expired bearer token would be sent while a fresh one could be had.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { TokenFileSource, withTokenSource } from '../../src/cluster/token-source.js';
import { startOidcIssuer } from '../helpers/oidc-issuer.js';
import { writeOneUserKubeconfig } from '../helpers/one-user-kubeconfig.js';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-credential-expiry-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const kubeconfig = (dir: string, user: string) => writeOneUserKubeconfig(dir, user);

const bearer = async (api: ApiConnection) => (await api.requestOptions()).headers.Authorization;

test('an exec credential is asked again once its expirationTimestamp has passed', async (t) => {
  const dir = tempDir(t);
  const plugin = path.join(dir, 'plugin.js');
  // A new token each run, expiring 1.5 s later.
  writeFileSync(
    plugin,
    `#!${process.execPath}
const fs = require('node:fs'); const runs = require('node:path').join(__dirname, 'runs');
const n = (fs.existsSync(runs) ? Number(fs.readFileSync(runs, 'utf8')) : 0) + 1; fs.writeFileSync(runs, String(n));
process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential',
  status: { token: 'tok-' + n, expirationTimestamp: new Date(Date.now() + 1500).toISOString() } }));
`,
  );
  chmodSync(plugin, 0o755);
  const { kc } = loadKubeConfig({ kubeconfig: kubeconfig(dir, `{exec: {apiVersion: client.authentication.k8s.io/v1, command: ./plugin.js}}`) });
  const api = new ApiConnection(kc, { env: {} });
  assert.equal(await bearer(api), 'Bearer tok-1');
  assert.equal(await bearer(api), 'Bearer tok-1', 'kept while valid: the plugin is not run per request');
  await sleep(1_700);
  assert.equal(await bearer(api), 'Bearer tok-2');
});

test('an OIDC id-token is refreshed once its exp (less the skew) has passed', async (t) => {
  const issuer = await startOidcIssuer({ refreshToken: 'rt', onIdToken: () => undefined });
  t.after(() => issuer.close());
  const first = issuer.idToken('me', 12); // due for refresh (exp - 10 s) in 2 s
  const config = [
    `client-id: ${issuer.clientId}`,
    `idp-issuer-url: "${issuer.url}"`,
    'refresh-token: rt',
    `id-token: "${first}"`,
    `idp-certificate-authority-data: "${Buffer.from(issuer.caPem).toString('base64')}"`,
  ].join(', ');
  const { kc } = loadKubeConfig({ kubeconfig: kubeconfig(tempDir(t), `{auth-provider: {name: oidc, config: {${config}}}}`) });
  const api = new ApiConnection(kc, { env: {} });
  assert.equal(await bearer(api), `Bearer ${first}`);
  await sleep(2_200);
  const second = await bearer(api);
  assert.notEqual(second, `Bearer ${first}`);
  assert.equal(issuer.refreshes, 1);
});

test('a token file is read again when its source would, not a minute after the options were made', async (t) => {
  const dir = tempDir(t);
  const tokenFile = path.join(dir, 'token');
  writeFileSync(tokenFile, 'one\n');
  const { kc } = loadKubeConfig({ kubeconfig: kubeconfig(dir, '{token: static}') });
  const api = new ApiConnection(withTokenSource(kc, new TokenFileSource(tokenFile, 300)), { env: {} });
  assert.equal(await bearer(api), 'Bearer one');
  writeFileSync(tokenFile, 'two\n');
  await sleep(400);
  assert.equal(await bearer(api), 'Bearer two');
});

test('credentials without an expiry keep the options: the same object, no work per request', async (t) => {
  const { kc } = loadKubeConfig({ kubeconfig: kubeconfig(tempDir(t), '{token: static}') });
  const api = new ApiConnection(kc, { env: {} });
  const a = await api.requestOptions();
  assert.equal(await api.requestOptions(), a);
});
