// Token sources for credentials client-node cannot keep fresh: OIDC ID tokens and tokenFile.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { once } from 'node:events';
import { jwtExpiry, OidcTokenSource } from '../../src/cluster/oidc.js';
import { TokenFileSource } from '../../src/cluster/token-source.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { flattenKubeConfig } from '../../src/state/kubeconfig.js';
import { startOidcIssuer } from '../helpers/oidc-issuer.js';
import { writeOneUserKubeconfig } from '../helpers/one-user-kubeconfig.js';

const jwt = (payload: object) => `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.sig`;

test('jwtExpiry reads exp; anything unreadable counts as expired (0)', () => {
  assert.equal(jwtExpiry(jwt({ exp: 1_900_000_000 })), 1_900_000_000);
  for (const bad of ['', 'abc', 'a.b.c', jwt({ exp: 'soon' }), jwt({})]) assert.equal(jwtExpiry(bad), 0, bad);
});

test('a fresh token is returned without a refresh; without refresh settings an expired one is passed on for the API server to judge', async () => {
  const fresh = jwt({ exp: Math.floor(Date.now() / 1000) + 600 });
  assert.equal(await new OidcTokenSource({ 'id-token': fresh }).token(), fresh);
  const stale = jwt({ exp: Math.floor(Date.now() / 1000) - 1 });
  assert.equal(await new OidcTokenSource({ 'id-token': stale, 'client-id': 'x' }).token(), stale);
});

test('a failed OIDC refresh is not asked again of the issuer for a few seconds: requests in turn get its error', async (t) => {
  const issuer = await startOidcIssuer({ refreshToken: 'the-right-one', onIdToken: () => undefined });
  t.after(() => issuer.close());
  const config = () => ({
    'id-token': jwt({ exp: Math.floor(Date.now() / 1000) - 60 }),
    'idp-issuer-url': issuer.url,
    'client-id': issuer.clientId,
    'refresh-token': 'revoked',
    'idp-certificate-authority-data': Buffer.from(issuer.caPem).toString('base64'),
  });
  const held = new OidcTokenSource(config());
  for (let i = 0; i < 3; i++) await assert.rejects(held.token(), /server responded with an error/);
  assert.equal(issuer.tokenRequests, 1, 'one refresh for three requests in turn');
  // Without the hold (0 ms) each request asks again: what the hold saves the identity provider.
  const unheld = new OidcTokenSource(config(), 0);
  for (let i = 0; i < 3; i++) await assert.rejects(unheld.token(), /server responded with an error/);
  assert.equal(issuer.tokenRequests, 4);
});

test('an idp-issuer-url spelled with a trailing slash still refreshes (client-go reads only the token endpoint)', async (t) => {
  let registered = '';
  // An issuer with a path, as Keycloak's realms: there the slash is part of what is compared.
  const issuer = await startOidcIssuer({ refreshToken: 'good', onIdToken: (token) => void (registered = token), path: '/realms/dev' });
  t.after(() => issuer.close());
  const source = new OidcTokenSource({
    'id-token': jwt({ exp: Math.floor(Date.now() / 1000) - 60 }),
    'idp-issuer-url': `${issuer.url}/`,
    'client-id': issuer.clientId,
    'refresh-token': 'good',
    'idp-certificate-authority-data': Buffer.from(issuer.caPem).toString('base64'),
  });
  const token = await source.token();
  assert.ok(token && token === registered, 'the refreshed ID token');
  assert.equal(issuer.refreshes, 1);
});

/** Runs `fn` with a token file path in a fresh directory, removed afterwards. */
async function withTokenFile(fn: (file: string, dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'token-file-'));
  try {
    await fn(join(dir, 'token'), dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('TokenFileSource: trimmed, read again after its TTL, the last good token kept when the file vanishes', async () => {
  await withTokenFile(async (file, dir) => {
    writeFileSync(file, 'first-token\n');
    const source = new TokenFileSource(file, 50);
    assert.equal(await source.token(), 'first-token');
    writeFileSync(file, '  second-token \r\n');
    assert.equal(await source.token(), 'first-token', 'cached within the TTL');
    await new Promise((r) => setTimeout(r, 70));
    assert.equal(await source.token(), 'second-token');
    rmSync(file);
    await new Promise((r) => setTimeout(r, 70));
    assert.equal(await source.token(), 'second-token', 'a failed read keeps the last token');
    await assert.rejects(new TokenFileSource(join(dir, 'missing')).token(), /cannot read the kubeconfig tokenFile/);
  });
});

test('TokenFileSource: a file caught empty (rewritten in place) keeps the last token, as client-go does', async () => {
  await withTokenFile(async (file) => {
    writeFileSync(file, 'first-token\n');
    const source = new TokenFileSource(file, 20);
    assert.equal(await source.token(), 'first-token');
    // `echo $T > file` truncates before it writes: a read in between sees nothing.
    writeFileSync(file, '\n');
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(await source.token(), 'first-token', 'an empty read is not a token');
    writeFileSync(file, 'second-token\n');
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(await source.token(), 'second-token');
    writeFileSync(file, '');
    await assert.rejects(new TokenFileSource(file).token(), /tokenFile .*: the file is empty/);
  });
});

test('a token beside a tokenFile is sent while the file cannot be read, as kubectl does; the file wins once it can', async () => {
  await withTokenFile(async (file, dir) => {
    const kubeconfig = writeOneUserKubeconfig(dir, '{token: inline-token, tokenFile: token}');
    const loaded = loadKubeConfig({ kubeconfig });
    const bearer = async () => (await new ApiConnection(loaded.kc, { env: {} }).requestOptions()).headers.Authorization;
    assert.equal(await bearer(), 'Bearer inline-token', 'the file does not exist yet');
    writeFileSync(file, 'file-token\n');
    assert.equal(await bearer(), 'Bearer file-token');
    // A managed daemon's kubeconfig keeps both, so the daemon falls back as well.
    const user = (flattenKubeConfig(loaded.kc, 'default', loaded.tokenFile) as { users: Array<{ user: Record<string, unknown> }> }).users[0]!.user;
    assert.deepEqual([user.tokenFile, user.token], [file, 'inline-token']);
  });
});

test('a tokenFile rotated before its minute is read again after a 401, as client-go resets its token source', async () => {
  await withTokenFile(async (file, dir) => {
    const kubeconfig = writeOneUserKubeconfig(dir, '{tokenFile: token}');
    writeFileSync(file, 'old-token\n');
    const api = new ApiConnection(loadKubeConfig({ kubeconfig }).kc, { env: {} });
    const first = await api.requestOptions();
    assert.equal(first.headers.Authorization, 'Bearer old-token');
    writeFileSync(file, 'new-token\n');
    // Read a second ago or more: the refused token is not the file's any more.
    await new Promise((r) => setTimeout(r, 1_050));
    const renewed = await api.renewedAfter401(first);
    assert.equal(renewed?.headers.Authorization, 'Bearer new-token', 'the rotated file was read at once, not a minute later');
    assert.equal(await api.renewedAfter401(renewed!), undefined, 'a file unchanged since gives the same token: nothing to retry with');
  });
});

test('an OIDC issuer that does not answer, or cannot be reached, is named and said so (not "something went wrong")', async (t) => {
  const issuer = await startOidcIssuer({ refreshToken: 'rt', onIdToken: () => undefined });
  t.after(() => issuer.close());
  // Takes the connection and never answers (not even the TLS handshake).
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
  const config = (url: string) => ({
    'id-token': jwt({ exp: Math.floor(Date.now() / 1000) - 60 }),
    'idp-issuer-url': url,
    'client-id': issuer.clientId,
    'refresh-token': 'rt',
    'idp-certificate-authority-data': Buffer.from(issuer.caPem).toString('base64'),
  });
  const silentUrl = `https://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
  await assert.rejects(new OidcTokenSource(config(silentUrl), 0, undefined, 1).token(), {
    message: `the OIDC issuer ${silentUrl} did not answer within 1 s`,
  });
  const closed = net.createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const closedUrl = `https://127.0.0.1:${(closed.address() as net.AddressInfo).port}`;
  await new Promise((r) => closed.close(r));
  await assert.rejects(new OidcTokenSource(config(closedUrl), 0, undefined, 1).token(), {
    message: new RegExp(`^the OIDC issuer ${closedUrl} could not be reached: connect ECONNREFUSED 127\\.0\\.0\\.1:\\d+$`),
  });
});
