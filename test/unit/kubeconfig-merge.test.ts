// KUBECONFIG with several files, merged as client-go's loader.go does: missing files skipped, an
// empty file is an empty config, the first file to name a cluster, user or context wins, and so
// does the first current-context; relative paths are relative to the file that names them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type https from 'node:https';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { StartupError } from '../../src/core/errors.js';
import { flattenKubeConfig } from '../../src/state/kubeconfig.js';

function kubeconfig(o: { ctx: string; cluster: string; user: string; token: string; current?: boolean }): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    `clusters: [{name: ${o.cluster}, cluster: {server: "https://${o.cluster}.example:6443"}}]`,
    `users: [{name: ${o.user}, user: {token: ${o.token}}}]`,
    `contexts: [{name: ${o.ctx}, context: {cluster: ${o.cluster}, user: ${o.user}}}]`,
    o.current ? `current-context: ${o.ctx}` : '',
    '',
  ].join('\n');
}

function setup(t: { after(fn: () => void): void }) {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-kubeconfig-merge-'));
  const saved = process.env.KUBECONFIG;
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
    if (saved === undefined) delete process.env.KUBECONFIG;
    else process.env.KUBECONFIG = saved;
  });
  const file = (name: string, text: string | Buffer) => {
    const f = path.join(dir, name);
    mkdirSync(path.dirname(f), { recursive: true });
    writeFileSync(f, text);
    return f;
  };
  const a = file('a', kubeconfig({ ctx: 'ctx-a', cluster: 'cl-a', user: 'admin', token: 't-a', current: true }));
  const b = file('b', kubeconfig({ ctx: 'ctx-b', cluster: 'cl-b', user: 'admin-b', token: 't-b', current: true }));
  const c = file('c', kubeconfig({ ctx: 'ctx-c', cluster: 'cl-c', user: 'admin', token: 't-c' }));
  const empty = file('empty', '');
  const load = (...files: string[]) => {
    process.env.KUBECONFIG = files.join(path.delimiter);
    return loadKubeConfig({});
  };
  return { dir, file, a, b, c, empty, load };
}

test('the first file that sets current-context wins', (t) => {
  const { a, b, load } = setup(t);
  const l = load(a, b);
  assert.equal(l.context, 'ctx-a');
  assert.equal(l.server, 'https://cl-a.example:6443');
  // The second file's entries are there too.
  assert.equal(loadKubeConfig({ context: 'ctx-b' }).server, 'https://cl-b.example:6443');
});

test('a missing file in the list is skipped, even the first', (t) => {
  const { dir, a, load } = setup(t);
  assert.equal(load(path.join(dir, 'nope'), a).context, 'ctx-a');
});

test('a name defined in two files: the first file’s entry, no "Duplicate" error', (t) => {
  const { a, c, load } = setup(t);
  const l = load(a, c);
  assert.equal(l.kc.getCurrentUser()?.token, 't-a');
  // ctx-c names user "admin": it gets the first file's admin too, as with kubectl.
  const viaC = loadKubeConfig({ context: 'ctx-c' });
  assert.equal(viaC.kc.getCurrentUser()?.token, 't-a');
  // A managed daemon's kubeconfig is made from the same merged view.
  const flat = flattenKubeConfig(l.kc, l.namespace) as { users: Array<{ user: { token?: string } }> };
  assert.equal(flat.users[0]!.user.token, 't-a');
});

test('an empty file in the list is an empty config', (t) => {
  const { a, empty, load } = setup(t);
  assert.equal(load(a, empty).context, 'ctx-a');
  assert.equal(load(empty, a).context, 'ctx-a');
});

test('relative paths are resolved against the file that names them', (t) => {
  const { a, file, dir } = setup(t);
  const sub = path.join(dir, 'sub');
  const f = file(
    'sub/config',
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters: [{name: cl-s, cluster: {server: "https://s.example:6443", certificate-authority: ca.crt}}]',
      'users: [{name: s, user: {client-certificate: certs/c.crt, client-key: certs/c.key}}, {name: tf, user: {tokenFile: tok}},',
      '  {name: ex, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: ./cred.sh}}}]',
      'contexts: [{name: s, context: {cluster: cl-s, user: s}}, {name: tf, context: {cluster: cl-s, user: tf}}, {name: ex, context: {cluster: cl-s, user: ex}}]',
      '',
    ].join('\n'),
  );
  file('sub/tok', 'file-token\n');
  process.env.KUBECONFIG = [a, f].join(path.delimiter);
  const s = loadKubeConfig({ context: 's' });
  assert.equal(s.kc.getCurrentCluster()?.caFile, path.join(sub, 'ca.crt'));
  assert.equal(s.kc.getCurrentUser()?.certFile, path.join(sub, 'certs/c.crt'));
  assert.equal(s.kc.getCurrentUser()?.keyFile, path.join(sub, 'certs/c.key'));
  assert.equal(loadKubeConfig({ context: 'tf' }).tokenFile, path.join(sub, 'tok'));
  assert.equal(loadKubeConfig({ context: 'ex' }).kc.getCurrentUser()?.exec.command, path.join(sub, 'cred.sh'));
});

test('a current-context that names no context is told apart from none, as kubectl does', (t) => {
  const { file, load } = setup(t);
  const stale = file('stale', kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't' }) + 'current-context: old-prod\n');
  assert.throws(
    () => load(stale),
    /the kubeconfig's current-context "old-prod" names no context it defines \(known: prod\): pass --context or run kubectl config use-context/,
  );
  const none = file('none', kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't' }));
  assert.throws(() => load(none), /^StartupError: the kubeconfig has no current context \(known: prod\): pass --context or run kubectl config use-context$/);
});

test('a context that names no user says so, not user "undefined"', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true });
  assert.throws(
    () => load(file('no-user', text.replace(', user: u}', '}'))),
    /: context "prod" names no user: set one with kubectl config set-context prod --user=NAME$/,
  );
});

test('a server without its scheme is refused naming the cluster, not crashed on as "Invalid URL"', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true }).replace('"https://cl.example:6443"', '"10.0.0.1:6443"');
  assert.throws(
    () => load(file('no-scheme', text)),
    /: cluster "cl" has server "10\.0\.0\.1:6443", which is not an https:\/\/ \(or http:\/\/\) URL: write it whole, e\.g\. https:\/\/10\.0\.0\.1:6443$/,
  );
});

test('a server without its scheme but with a password is refused without showing the password', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true }).replace(
    '"https://cl.example:6443"',
    '"admin:s3cret@10.0.0.1:6443"',
  );
  assert.throws(
    () => load(file('no-scheme-password', text)),
    (err: Error) => !err.message.includes('s3cret') && /has server "admin:\*\*\*@10\.0\.0\.1:6443", which is not/.test(err.message),
  );
});

test('insecure-skip-tls-verify beside a certificate-authority is refused, as kubectl refuses it; either alone loads', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true });
  const withCluster = (extra: string) => text.replace('server: "https://cl.example:6443"}', `server: "https://cl.example:6443", ${extra}}`);
  const refused =
    /: cluster "cl" sets insecure-skip-tls-verify and a certificate-authority: kubectl refuses that pair too .*; remove insecure-skip-tls-verify$/;
  assert.throws(() => load(file('both-data', withCluster('insecure-skip-tls-verify: true, certificate-authority-data: Zm9v'))), refused);
  assert.throws(() => load(file('both-file', withCluster('insecure-skip-tls-verify: true, certificate-authority: /nonexistent/ca.crt'))), refused);
  assert.equal(load(file('insecure', withCluster('insecure-skip-tls-verify: true'))).context, 'prod');
  assert.equal(load(file('ca', withCluster('certificate-authority-data: Zm9v'))).context, 'prod');
});

test('a key given twice in one mapping takes its last value, as kubectl reads it, not an error', (t) => {
  const { file, load } = setup(t);
  const text = [
    'apiVersion: v1',
    'kind: Config',
    'clusters: [{name: cl, cluster: {server: "https://old.example:6443", server: "https://cl.example:6443"}}]',
    'users: [{name: u, user: {token: t}}]',
    'contexts:',
    '- name: prod',
    '  context: {cluster: cl, user: u, namespace: kube-system}',
    '  context: {cluster: cl, user: u, namespace: shop}',
    'current-context: prod',
    '',
  ].join('\n');
  const l = load(file('dup', text));
  assert.equal(l.server, 'https://cl.example:6443');
  assert.equal(l.namespace, 'shop');
});

test('a CA, client certificate or key both as a file and as -data is refused naming it, as kubectl refuses it', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true });
  const withCluster = (extra: string) => text.replace('server: "https://cl.example:6443"}', `server: "https://cl.example:6443", ${extra}}`);
  const withUser = (extra: string) => text.replace('{token: t}', `{${extra}}`);
  const ca = file('ca.crt', 'not read\n');
  assert.throws(
    () => load(file('ca-both', withCluster(`certificate-authority: ${ca}, certificate-authority-data: Zm9v`))),
    /: cluster "cl" sets both certificate-authority and certificate-authority-data: kubectl refuses that pair too \(certificate-authority-data would override\); keep one of them$/,
  );
  assert.throws(
    () => load(file('cert-both', withUser(`client-certificate: ${ca}, client-certificate-data: Zm9v, client-key-data: Zm9v`))),
    /: user "u" sets both client-certificate and client-certificate-data: /,
  );
  assert.throws(
    () => load(file('key-both', withUser(`client-certificate-data: Zm9v, client-key: ${ca}, client-key-data: Zm9v`))),
    /: user "u" sets both client-key and client-key-data: /,
  );
  assert.equal(load(file('ca-file', withCluster(`certificate-authority: ${ca}`))).context, 'prod');
  assert.equal(load(file('cert-data', withUser('client-certificate-data: Zm9v, client-key-data: Zm9v'))).context, 'prod');
});

test('a token beside a username and password is refused, as kubectl refuses it; either alone loads', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true });
  assert.throws(
    () => load(file('token-basic', text.replace('{token: t}', '{token: t, username: admin, password: secret}'))),
    /: user "u" sets a token and a username\/password: kubectl refuses that too \(more than one authentication method, only one is allowed\); remove username and password$/,
  );
  assert.throws(() => load(file('token-user', text.replace('{token: t}', '{token: t, username: admin}'))), /: user "u" sets a token and a username\/password/);
  assert.throws(
    () => load(file('tokenfile-basic', text.replace('{token: t}', '{tokenFile: tok, username: admin, password: secret}'))),
    /: user "u" sets a tokenFile and a username\/password: kubectl refuses that too \(username\/password or bearer token may be set, but not both\); remove username and password$/,
  );
  assert.equal(load(file('basic', text.replace('{token: t}', '{username: admin, password: secret}'))).context, 'prod');
});

test('as-groups, as-uid or as-user-extra without as is refused, as kubectl refuses it', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true });
  assert.throws(
    () => load(file('groups', text.replace('{token: t}', '{token: t, as-groups: [system:masters]}'))),
    /: user "u" sets as-groups without as: kubectl refuses that too \(requesting uid, groups or user-extra without impersonating a user\); add as: USER or remove it$/,
  );
  assert.throws(
    () => load(file('uid-extra', text.replace('{token: t}', '{token: t, as-uid: "1", as-user-extra: {scopes: [a]}}'))),
    /: user "u" sets as-uid, as-user-extra without as: .*remove them$/,
  );
  const withAs = load(file('with-as', text.replace('{token: t}', '{token: t, as: jane, as-groups: [dev]}')));
  assert.deepEqual(withAs.impersonation?.groups, ['dev']);
  assert.equal(load(file('empty-groups', text.replace('{token: t}', '{token: t, as-groups: []}'))).context, 'prod');
});

test('a client certificate without its key is refused, as kubectl refuses it', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true });
  const refused =
    /: user "u" sets a client certificate without its key: kubectl refuses that too \(client-key-data or client-key must be specified\); add client-key$/;
  assert.throws(() => load(file('cert-file', text.replace('{token: t}', '{client-certificate: /nonexistent/c.crt}'))), refused);
  assert.throws(() => load(file('cert-data', text.replace('{token: t}', '{client-certificate-data: Zm9v}'))), refused);
  assert.equal(load(file('pair', text.replace('{token: t}', '{client-certificate-data: Zm9v, client-key-data: Zm9v}'))).context, 'prod');
});

test('one file naming a cluster, user or context twice is refused, as kubectl refuses it', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true });
  const twice = (key: string, entry: string) => text.replace(new RegExp(`^${key}: \\[(.*)\\]$`, 'm'), `${key}: [$1, ${entry}]`);
  assert.throws(
    () => load(file('clusters', twice('clusters', '{name: cl, cluster: {server: "https://other.example:6443"}}'))),
    /error loading config file ".*clusters": duplicate name "cl" in clusters$/,
  );
  assert.throws(() => load(file('users', twice('users', '{name: u, user: {token: t2}}'))), /duplicate name "u" in users$/);
  assert.throws(() => load(file('contexts', twice('contexts', '{name: prod, context: {cluster: cl, user: u}}'))), /duplicate name "prod" in contexts$/);
  assert.equal(load(file('other-name', twice('users', '{name: u2, user: {token: t2}}'))).context, 'prod');
});

test('a UTF-16 kubeconfig with its byte-order mark loads, as kubectl reads it (PowerShell 5 writes UTF-16LE)', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true });
  const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]);
  const be = Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(text, 'utf16le').swap16()]);
  for (const [name, bytes] of [
    ['utf16le', le],
    ['utf16be', be],
  ] as const) {
    const l = load(file(name, bytes));
    assert.equal(l.server, 'https://cl.example:6443', name);
    assert.equal(l.kc.getCurrentUser()?.token, 't', name);
  }
});

test('insecure-skip-tls-verify: yes (or on, y) is true, as go-yaml reads YAML 1.1 booleans for kubectl', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true });
  const withCluster = (extra: string) => text.replace('server: "https://cl.example:6443"}', `server: "https://cl.example:6443", ${extra}}`);
  for (const v of ['yes', 'on', 'Y', 'true']) {
    assert.equal(load(file(`insecure-${v}`, withCluster(`insecure-skip-tls-verify: ${v}`))).kc.getCurrentCluster()?.skipTLSVerify, true, v);
  }
  for (const v of ['no', 'off', 'n', 'false', '"yes"']) {
    assert.equal(!!load(file(`secure-${v}`, withCluster(`insecure-skip-tls-verify: ${v}`))).kc.getCurrentCluster()?.skipTLSVerify, false, v);
  }
});

test('an exec plugin beside an auth-provider, or without its apiVersion or command, is refused, as kubectl refuses it', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true });
  const exec = '{exec: {apiVersion: client.authentication.k8s.io/v1, command: cred, interactiveMode: Never}';
  assert.throws(
    () => load(file('both', text.replace('{token: t}', `${exec}, auth-provider: {name: oidc, config: {id-token: x}}}`))),
    /: user "u" sets an exec plugin and an auth-provider: kubectl refuses that too \(authProvider cannot be provided in combination with an exec plugin\); keep one of them$/,
  );
  assert.throws(
    () => load(file('no-version', text.replace('{token: t}', '{exec: {command: cred, interactiveMode: Never}}'))),
    /: user "u" sets an exec plugin without its apiVersion: kubectl refuses that too \(apiVersion must be specified\)/,
  );
  assert.throws(
    () => load(file('no-command', text.replace('{token: t}', '{exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never}}'))),
    /: user "u" sets an exec plugin without its command: kubectl refuses that too/,
  );
  assert.equal(load(file('exec', text.replace('{token: t}', `${exec}}`))).context, 'prod');
});

test('KUBECONFIG set to empty entries only (":") reads no file, as kubectl, not ~/.kube/config', (t) => {
  const { dir, a, load } = setup(t);
  const home = process.env.HOME;
  t.after(() => (process.env.HOME = home));
  process.env.HOME = dir;
  mkdirSync(path.join(dir, '.kube'));
  writeFileSync(path.join(dir, '.kube', 'config'), kubeconfig({ ctx: 'home', cluster: 'cl-h', user: 'h', token: 't-h', current: true }));
  assert.throws(() => load('', ''), /KUBECONFIG=":" names no file: set it to one, or unset it for ~\/\.kube\/config$/);
  assert.equal(load(a, '').context, 'ctx-a');
  delete process.env.KUBECONFIG;
  assert.equal(loadKubeConfig({}).context, 'home');
});

test('an exec plugin with provideClusterInfo and a CA file that is not there: one line naming the file, as for other users', (t) => {
  const { dir, file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true })
    .replace('server: "https://cl.example:6443"}', `server: "https://cl.example:6443", certificate-authority: ${path.join(dir, 'gone.crt')}}`)
    .replace('{token: t}', '{exec: {apiVersion: client.authentication.k8s.io/v1, command: cred, interactiveMode: Never, provideClusterInfo: true}}');
  assert.throws(
    () => load(file('exec-ca', text)),
    (err: Error) =>
      err instanceof StartupError &&
      /^context "prod": cannot read the kubeconfig's certificate-authority file \S+gone\.crt of cluster "cl": no such file$/.test(err.message),
  );
});

test('a kubeconfig with a trailing --- or a second document: the first is read, as kubectl reads it', (t) => {
  const { file, load } = setup(t);
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true });
  assert.equal(load(file('trailing', `${text}---\n`)).context, 'prod');
  const second = kubeconfig({ ctx: 'other', cluster: 'cl2', user: 'u2', token: 't2', current: true });
  const l = load(file('two', `---\n${text}---\n${second}`));
  assert.equal(l.context, 'prod');
  assert.equal(l.kc.getContexts().length, 1);
});

test('an empty kubeconfig file says it defines no context, not "no kubeconfig found: pass --kubeconfig"', (t) => {
  const { empty, load } = setup(t);
  const said = /: kubeconfig \S+empty defines no context: add one \(kubectl config set-context\) or use another kubeconfig$/;
  assert.throws(() => loadKubeConfig({ kubeconfig: empty }), said);
  assert.throws(() => load(empty), said);
});

test('a token beside an oidc auth-provider is what is sent, as kubectl sends it', async (t) => {
  const { file, load } = setup(t);
  const jwt = (exp: number) => ['{"alg":"none"}', JSON.stringify({ exp })].map((p) => Buffer.from(p).toString('base64url')).join('.') + '.sig';
  const provider = `auth-provider: {name: oidc, config: {idp-issuer-url: "https://127.0.0.1:1", client-id: x, id-token: "${jwt(Date.now() / 1000 + 3600)}"}}`;
  const text = kubeconfig({ ctx: 'prod', cluster: 'cl', user: 'u', token: 't', current: true }).replace('{token: t}', `{token: t, ${provider}}`);
  const opts: https.RequestOptions = {};
  await load(file('token-oidc', text)).kc.applyToHTTPSOptions(opts);
  assert.equal((opts.headers as Record<string, unknown> | undefined)?.Authorization, 'Bearer t');
});
