// An `auth-provider: oidc` user's tokens kept in the kubeconfig file that defines the user, as
// client-go keeps them: written back after a refresh (a rotated refresh token stays kubectl's to
// use), read again before one (a token kubectl refreshed is taken, not refreshed over), and the
// same file for a managed daemon, whose own kubeconfig is a copy.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { OidcTokenSource } from '../../src/cluster/oidc.js';
import { OidcTokenStore } from '../../src/cluster/oidc-store.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { writeTransientKubeConfig } from '../../src/state/kubeconfig.js';
import { startOidcIssuer } from '../helpers/oidc-issuer.js';

const expired = () =>
  `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(JSON.stringify({ exp: Math.floor(Date.now() / 1000) - 60 })).toString('base64url')}.sig`;

function kubeconfigFile(t: { after(fn: () => void): void }, config: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-oidc-store-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config');
  const doc = {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'dev',
    clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:6443' } }],
    contexts: [{ name: 'dev', context: { cluster: 'c', user: 'alice' } }],
    users: [
      { name: 'bob', user: { token: 'bobs' } },
      { name: 'alice', user: { 'auth-provider': { name: 'oidc', config } } },
    ],
  };
  writeFileSync(file, yaml.dump(doc), { mode: 0o600 });
  return file;
}

/** The auth-provider config for `issuer`, an expired id-token and the refresh token given. */
const settings = (issuer: Awaited<ReturnType<typeof startOidcIssuer>>, refreshToken: string) => ({
  'client-id': issuer.clientId,
  'idp-issuer-url': issuer.url,
  'refresh-token': refreshToken,
  'id-token': expired(),
  'idp-certificate-authority-data': Buffer.from(issuer.caPem).toString('base64'),
});

const oidcConfigOf = (file: string) =>
  (yaml.load(readFileSync(file, 'utf8')) as { users: Array<{ name: string; user: { 'auth-provider'?: { config: Record<string, string> } } }> }).users.find(
    (u) => u.name === 'alice',
  )!.user['auth-provider']!.config;

test('a refresh writes the new id-token and the rotated refresh token back; the next refresh uses the rotated one', async (t) => {
  const issuer = await startOidcIssuer({ refreshToken: 'rt', onIdToken: () => undefined, rotate: true });
  t.after(() => issuer.close());
  const config = settings(issuer, 'rt');
  const file = kubeconfigFile(t, config);
  const source = new OidcTokenSource({ ...config }, 0, new OidcTokenStore(file, 'alice'));
  const token = await source.token();
  const kept = oidcConfigOf(file);
  assert.equal(kept['id-token'], token);
  assert.equal(kept['refresh-token'], 'rt.1', 'the rotated refresh token, the only one the issuer still takes');
  assert.equal(statSync(file).mode & 0o777, 0o600, 'its mode kept');
  assert.ok(!existsSync(`${file}.lock`));
  const doc = yaml.load(readFileSync(file, 'utf8')) as { users: Array<{ name: string }>; clusters: unknown[] };
  assert.deepEqual(
    doc.users.map((u) => u.name),
    ['bob', 'alice'],
    'the rest of the file as it was',
  );
  // kubectl reads the file: what it finds works at the issuer (the old refresh token would not).
  const kubectl = new OidcTokenSource({ ...config, ...kept, 'id-token': expired() }, 0);
  assert.ok(await kubectl.token());
  assert.equal(issuer.refreshes, 2);
});

test('a token refreshed by someone else meanwhile is taken from the file, not refreshed over', async (t) => {
  const issuer = await startOidcIssuer({ refreshToken: 'rt', onIdToken: () => undefined, rotate: true });
  t.after(() => issuer.close());
  const config = settings(issuer, 'spent-by-kubectl');
  const fresh = issuer.idToken('alice@example.com', 600);
  const file = kubeconfigFile(t, { ...config, 'id-token': fresh, 'refresh-token': 'rt' });
  const source = new OidcTokenSource(config, 0, new OidcTokenStore(file, 'alice'));
  assert.equal(await source.token(), fresh);
  assert.equal(issuer.tokenRequests, 0, 'no refresh with the refresh token kubectl has spent');
});

test("a managed daemon's kubeconfig names the user's own file for the tokens, and the daemon uses it", async (t) => {
  const file = kubeconfigFile(t, { 'client-id': 'x', 'idp-issuer-url': 'https://idp.invalid', 'refresh-token': 'rt', 'id-token': expired() });
  const loaded = loadKubeConfig({ kubeconfig: file });
  assert.equal(loaded.oidcStore, file);
  const transient = path.join(path.dirname(file), 'daemon-kubeconfig');
  writeTransientKubeConfig(transient, loaded.kc, loaded.namespace, loaded.tokenFile, loaded.impersonation, loaded.oidcStore);
  assert.equal(loadKubeConfig({ kubeconfig: transient }).oidcStore, file, 'not its own copy');
  // A user without oidc has none, and its daemon kubeconfig no extension.
  const doc = yaml.load(readFileSync(file, 'utf8')) as { contexts: Array<{ context: { user: string } }> };
  doc.contexts[0]!.context.user = 'bob';
  writeFileSync(file, yaml.dump(doc));
  const plain = loadKubeConfig({ kubeconfig: file });
  assert.equal(plain.oidcStore, undefined);
  writeTransientKubeConfig(transient, plain.kc, plain.namespace);
  assert.doesNotMatch(readFileSync(transient, 'utf8'), /extensions/);
});

test('a file planted where the write-back puts its temporary copy is neither written through nor renamed over the kubeconfig', async (t) => {
  const file = kubeconfigFile(t, { 'client-id': 'x', 'idp-issuer-url': 'https://idp.invalid', 'refresh-token': 'rt', 'id-token': expired() });
  // Another user, in a directory both can write, creates the name the pid made guessable, readable by all.
  const planted = path.join(path.dirname(file), `.${path.basename(file)}.proxyout-${process.pid}`);
  writeFileSync(planted, 'theirs\n', { mode: 0o666 });
  chmodSync(planted, 0o666);
  assert.equal(await new OidcTokenStore(file, 'alice').write({ 'id-token': 'new-id', 'refresh-token': 'new-rt' }), true);
  assert.equal(oidcConfigOf(file)['refresh-token'], 'new-rt');
  assert.equal(statSync(file).mode & 0o777, 0o600, 'the kubeconfig keeps its own mode');
  assert.equal(readFileSync(planted, 'utf8'), 'theirs\n', 'the tokens never went into their file');
  assert.deepEqual(
    readdirSync(path.dirname(file)).filter((n) => n.includes('proxyout-')),
    [path.basename(planted)],
    'no temporary file left behind',
  );
});

test('a symlinked kubeconfig stays a link: the tokens are written into the file it points at', async (t) => {
  const real = kubeconfigFile(t, { 'client-id': 'x', 'idp-issuer-url': 'https://idp.invalid', 'refresh-token': 'rt', 'id-token': expired() });
  const link = path.join(path.dirname(real), 'link-config');
  symlinkSync(real, link);
  assert.equal(await new OidcTokenStore(link, 'alice').write({ 'id-token': 'new-id', 'refresh-token': 'new-rt' }), true);
  assert.ok(lstatSync(link).isSymbolicLink(), 'still a link');
  assert.equal(oidcConfigOf(real)['refresh-token'], 'new-rt', 'the file it points at has the rotated token');
  assert.equal(statSync(real).mode & 0o777, 0o600);
});
