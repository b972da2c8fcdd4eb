// service-install refuses, in one line and before writing anything (--dry-run too), the flags the
// proxy would refuse on every start of the service: listen addresses, the credentials file (and
// its mode), the kubeconfig and its contexts, a listener others can reach without credentials, a
// port mapping, the config file (test/integration/service-run.test.ts runs the units themselves).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runCli } from '../helpers/proxy-process.js';

const KUBECONFIG = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:6443'}
users:
- name: u
  user: {token: t}
contexts:
- name: prod
  context: {cluster: c, user: u, namespace: shop}
current-context: prod
`;

/** A home with ~/.kube/config (context prod) and a good 0600 credentials file. */
function home(t: { after(fn: () => void): void }) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'proxyout-svc-check-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(path.join(dir, '.kube'));
  writeFileSync(path.join(dir, '.kube/config'), KUBECONFIG, { mode: 0o600 });
  writeFileSync(path.join(dir, 'auth'), 'alice:s3cret\n', { mode: 0o600 });
  writeFileSync(path.join(dir, 'open-auth'), 'alice:s3cret\n', { mode: 0o644 });
  const env = { HOME: dir, XDG_CONFIG_HOME: '', XDG_STATE_HOME: '', KUBECTL_PROXYOUT_STATE_DIR: '', SSH_AUTH_SOCK: '', KUBECONFIG: '' };
  return { dir, env, unit: path.join(dir, '.config/systemd/user/kubectl-proxyout.service') };
}

const linux = { skip: process.platform !== 'linux' ? 'service-install writes a systemd unit on Linux only' : false };

test('flags the proxy would refuse: one line, exit 1, nothing written — with and without --dry-run', linux, async (t) => {
  const h = home(t);
  const cases: Array<[string[], RegExp]> = [
    [['--listen-socks', 'nope'], /^Error: --listen-socks nope: invalid listen address "nope": missing ":PORT"/],
    [['--listen-http', '127.0.0.1:99999'], /^Error: --listen-http 127\.0\.0\.1:99999: invalid listen address .*port "99999" is not a number from 0 to 65535/],
    [['--listen-socks', 'off'], /^Error: nothing to listen on/],
    [['--kubeconfig', 'missing/kc'], /^Error: kubeconfig missing\/kc does not exist\n/],
    [['--context', 'staging'], /^Error: context "staging" not found in kubeconfig \(known: prod\)\n/],
    [['--proxy-auth-file', 'no-such-file'], /^Error: --proxy-auth-file no-such-file: ENOENT/],
    [
      ['--proxy-auth-file', path.join(h.dir, 'open-auth')],
      /^Error: --proxy-auth-file .*open-auth: refusing a file that group or others can access \(mode 644\); run chmod 600/,
    ],
    [
      ['--listen-http', '0.0.0.0:3128'],
      /^Error: --listen-http 0\.0\.0\.0:3128 is not a loopback address, so other machines could use your cluster access through it/,
    ],
    [['--forward', 'nope'], /^Error: --forward nope: invalid port mapping "nope": missing "="/],
    [['--config', 'no-such.yaml'], /^Error: cannot read the config file no-such\.yaml: no such file/],
    // A route of the config file: its file, line and name (it said only the context).
    [['--config', path.join(h.dir, 'routes.yaml')], /^Error: .*routes\.yaml:2: route staging: context "staging" not found in kubeconfig \(known: prod\)\n/],
  ];
  writeFileSync(path.join(h.dir, 'routes.yaml'), 'routes:\n  - name: staging\n    kind: cluster\n    context: staging\n');
  // Each case once, with and without --dry-run in turn (the checks come before that choice): a
  // CLI start costs a second or more here.
  for (const [i, [flags, message]] of cases.entries()) {
    const dry = i % 2 === 0 ? ['--dry-run'] : [];
    const r = await runCli(['service-install', ...dry, ...flags], { env: h.env });
    assert.equal(r.code, 1, `${flags.join(' ')} ${dry.join('')}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trimEnd().split('\n').length, 1, `one line: ${r.stderr}`);
    assert.equal(r.stdout, '', 'nothing printed as written');
    assert.ok(!existsSync(h.unit), `${flags.join(' ')}: no unit written`);
  }
});

test('credentials the installing shell has in $KUBECTL_PROXYOUT_PROXY_AUTH do not count: the unit does not carry them', linux, async (t) => {
  const h = home(t);
  const env = { ...h.env, KUBECTL_PROXYOUT_PROXY_AUTH: 'alice:s3cret' };
  const refused = await runCli(['service-install', '--dry-run', '--listen-socks', '0.0.0.0:1080'], { env });
  assert.equal(refused.code, 1, refused.stdout);
  assert.match(refused.stderr, /^Error: --listen-socks 0\.0\.0\.0:1080 is not a loopback address/);
  const withFile = await runCli(['service-install', '--dry-run', '--listen-socks', '0.0.0.0:1080', '--proxy-auth-file', path.join(h.dir, 'auth')], { env });
  assert.equal(withFile.code, 0, withFile.stderr);
});

test('flags the proxy takes are accepted', linux, async (t) => {
  const h = home(t);
  mkdirSync(path.join(h.dir, 'work'));
  writeFileSync(path.join(h.dir, 'work/kc'), KUBECONFIG, { mode: 0o600 });
  const r = await runCli(
    [
      'service-install',
      '--kubeconfig',
      path.join(h.dir, 'work/kc'),
      '--context',
      'prod',
      '--listen-socks',
      ':1080',
      '--listen-http',
      'unix:',
      '--proxy-auth-file',
      path.join(h.dir, 'auth'),
    ],
    { env: h.env },
  );
  assert.equal(r.code, 0, r.stderr);
  assert.ok(existsSync(h.unit));
  // No flags at all: ~/.kube/config's current context on the default SOCKS address.
  const plain = await runCli(['service-install', '--dry-run', '--name', 'other'], { env: h.env });
  assert.equal(plain.code, 0, plain.stderr);
});
