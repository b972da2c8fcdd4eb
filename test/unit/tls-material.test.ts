// The kubeconfig's TLS material, wrong, is named as kubectl names it: the file of which cluster or
// user cannot be read, or the user whose client certificate and key do not match. Before, a
// missing file read "ENOENT: …" under "the credentials could not be obtained", and a mismatched
// pair failed at connect as "cannot reach the API server: …key values mismatch".
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import https from 'node:https';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection, CredentialError } from '../../src/cluster/api.js';
import { clientCertValidity } from '../../src/cluster/tls-material.js';
import { SimPki } from '../sim/pki.js';

const pki = new SimPki();
const alice = pki.clientCert('alice');
// SimPki's leaf certificates share one key: another user's key is a key of its own.
const bobKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }) as string;

function api(t: { after(fn: () => void): void }, cluster: string, user: string, server = 'https://127.0.0.1:6443'): ApiConnection {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-tls-material-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, 'ca.crt'), pki.caPem);
  writeFileSync(path.join(dir, 'alice.crt'), alice.certPem);
  writeFileSync(path.join(dir, 'alice.key'), alice.keyPem);
  writeFileSync(path.join(dir, 'bob.key'), bobKey);
  const file = path.join(dir, 'config');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: prod-cluster, cluster: {server: "${server}", ${cluster}}}]`,
      `users: [{name: alice, user: {${user}}}]`,
      'contexts: [{name: prod, context: {cluster: prod-cluster, user: alice}}]',
      'current-context: prod',
      '',
    ].join('\n'),
  );
  return new ApiConnection(loadKubeConfig({ kubeconfig: file }).kc, { env: {} });
}

const refused = (pattern: RegExp) => (err: unknown) => {
  assert.ok(err instanceof CredentialError, String(err));
  assert.match(err.message, pattern);
  return true;
};

test('a certificate-authority file that is not there is named with its cluster', async (t) => {
  await assert.rejects(
    api(t, 'certificate-authority: gone/ca.crt', 'token: t').requestOptions(),
    refused(/^context "prod": cannot read the kubeconfig's certificate-authority file \S+gone\/ca\.crt of cluster "prod-cluster": no such file$/),
  );
});

test('a client-key file that is not there is named with its user', async (t) => {
  await assert.rejects(
    api(t, 'certificate-authority: ca.crt', 'client-certificate: alice.crt, client-key: alice.pem').requestOptions(),
    refused(/^context "prod": cannot read the kubeconfig's client-key file \S+alice\.pem of user "alice": no such file$/),
  );
});

test('a certificate-authority, client key or tokenFile naming a directory says which, as kubectl does, not a bare EISDIR', (t) => {
  assert.throws(
    () => api(t, 'certificate-authority: .', 'token: t'),
    /^StartupError: context "prod": the kubeconfig's certificate-authority \S+ of cluster "prod-cluster" is a directory: name the file in it$/,
  );
  assert.throws(() => api(t, 'certificate-authority: ca.crt', 'client-certificate: alice.crt, client-key: .'), /client-key \S+ of user "alice" is a directory/);
  assert.throws(() => api(t, 'certificate-authority: ca.crt', 'tokenFile: .'), /tokenFile \S+ of user "alice" is a directory/);
});

test('a client certificate with the key of another is refused before any connection, naming the user', async (t) => {
  await assert.rejects(
    api(t, 'certificate-authority: ca.crt', 'client-certificate: alice.crt, client-key: bob.key').requestOptions(),
    refused(/^context "prod": the client certificate and client key of user "alice" do not match/),
  );
});

test('an encrypted client key is refused as encrypted, naming the user, not as a key that is not PEM', async (t) => {
  const pkcs8 = createPrivateKey(alice.keyPem).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }) as string;
  const pkcs1 = createPrivateKey(alice.keyPem).export({ type: 'pkcs1', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }) as string;
  for (const key of [pkcs8, pkcs1]) {
    const conn = api(t, 'certificate-authority: ca.crt', `client-certificate: alice.crt, client-key-data: ${Buffer.from(key).toString('base64')}`);
    await assert.rejects(
      conn.requestOptions(),
      refused(/^context "prod": the client key of user "alice" is encrypted \(a passphrase protects it\), which kubectl cannot use either: write it decrypted/),
    );
  }
});

test('a matching pair passes', async (t) => {
  const opts = await api(t, 'certificate-authority: ca.crt', 'client-certificate: alice.crt, client-key: alice.key').requestOptions();
  assert.equal(String(opts.cert), alice.certPem);
});

test('a certificate-authority-data with no PEM certificate is refused naming the cluster, not blamed on the server', async (t) => {
  await assert.rejects(
    api(t, `certificate-authority-data: ${Buffer.from('foobar').toString('base64')}`, 'token: t').requestOptions(),
    refused(/^context "prod": the kubeconfig's certificate-authority-data of cluster "prod-cluster" cannot be used: no PEM certificate in it$/),
  );
  const good = await api(t, `certificate-authority-data: ${Buffer.from(pki.caPem).toString('base64')}`, 'token: t').requestOptions();
  assert.equal(String(good.ca), pki.caPem);
});

test('a 401 to a client certificate past its validity says when it expired (the API server says only Unauthorized)', async (t) => {
  const validTo = Date.parse(new X509Certificate(alice.certPem).validTo);
  const validFrom = Date.parse(new X509Certificate(alice.certPem).validFrom);
  assert.equal(clientCertValidity(alice.certPem), undefined);
  assert.equal(
    clientCertValidity(alice.certPem, validTo + 1000),
    `the client certificate expired at ${new Date(validTo).toISOString().replace(/\.000Z$/, 'Z')}`,
  );
  assert.match(
    clientCertValidity(alice.certPem, validFrom - 1000) ?? '',
    /^the client certificate is valid only from \S+Z \(is this machine's clock right\?\)$/,
  );
  const conn = api(t, 'certificate-authority: ca.crt', 'client-certificate: alice.crt, client-key: alice.key');
  await conn.requestOptions();
  assert.equal(conn.refusalAdvice(), 'log in again or renew the token');
  t.mock.timers.enable({ apis: ['Date'], now: validTo + 1000 });
  assert.match(conn.refusalAdvice(), /^the client certificate expired at \S+Z: get a new one \(log in again, or renew it\)$/);
});

test('a CA bundle with a certificate that cannot be read is used without it, as kubectl uses it', async (t) => {
  const serving = pki.servingCert();
  const server = https.createServer({ cert: serving.certPem, key: serving.keyPem }, (_req, res) => res.end('{"kind":"APIVersions"}'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const { port } = server.address() as AddressInfo;
  // OpenSSL stopped at the unreadable block and dropped the CA after it; Go skips the block.
  const bundle = `-----BEGIN CERTIFICATE-----\nMIIBaWJhZGNlcnQ=\n-----END CERTIFICATE-----\n${pki.caPem}`;
  const conn = api(t, `certificate-authority-data: ${Buffer.from(bundle).toString('base64')}`, 'token: t', `https://127.0.0.1:${port}`);
  assert.deepEqual(await conn.getJson('/api', 5_000), { kind: 'APIVersions' });
});

test("a CA bundle's TRUSTED CERTIFICATE block is not trusted, as kubectl does not trust it", async (t) => {
  const serving = pki.servingCert();
  const server = https.createServer({ cert: serving.certPem, key: serving.keyPem }, (_req, res) => res.end('{"kind":"APIVersions"}'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const { port } = server.address() as AddressInfo;
  // Go's AppendCertsFromPEM takes CERTIFICATE blocks only ("certificate signed by unknown
  // authority" from kubectl); OpenSSL reads TRUSTED CERTIFICATE blocks as CAs too.
  const trusted = pki.caPem.replace(/(BEGIN|END) CERTIFICATE/g, '$1 TRUSTED CERTIFICATE');
  const bundle = `${trusted}${new SimPki().caPem}`;
  const conn = api(t, `certificate-authority-data: ${Buffer.from(bundle).toString('base64')}`, 'token: t', `https://127.0.0.1:${port}`);
  await assert.rejects(conn.getJson('/api', 5_000), /certificate|verify|issuer/i);
});
