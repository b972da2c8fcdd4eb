// An exec plugin's ExecCredential is checked as client-go checks it (exec.go refreshCredsLocked):
// one with no status, neither a token nor a certificate, or half a key pair is refused with a
// message naming the user, not sent as no credential at all (the API server then answered for
// system:anonymous, and the proxy gave RBAC advice). A plugin that is not installed is named,
// with the kubeconfig's installHint, as kubectl prints it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection, CredentialError } from '../../src/cluster/api.js';
import { runExecPluginsWithoutStdin } from '../../src/cluster/exec-credential.js';
import { writeOneUserKubeconfig } from '../helpers/one-user-kubeconfig.js';

interface Setup {
  execExtra?: string;
  command?: string;
  script?: string;
  /** More of the user entry, beside `exec`. */
  userExtra?: string;
}

function setup(t: { after(fn: () => void): void }, status: unknown, o: Setup = {}): ApiConnection {
  const { execExtra = '', command = './plugin.sh', script, userExtra = '' } = o;
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-exec-checks-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const plugin = path.join(dir, 'plugin.sh');
  const credential = { apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', ...(status === undefined ? {} : { status }) };
  writeFileSync(plugin, script ?? `#!/bin/sh\necho '${JSON.stringify(credential)}'\n`);
  chmodSync(plugin, 0o755);
  const file = writeOneUserKubeconfig(dir, `{${userExtra}exec: {apiVersion: client.authentication.k8s.io/v1, command: ${command}${execExtra}}}`, {
    user: 'sso',
    context: 'prod',
  });
  const { kc } = loadKubeConfig({ kubeconfig: file });
  runExecPluginsWithoutStdin(kc, undefined, 500);
  return new ApiConnection(kc, { env: {} });
}

const refused = (pattern: RegExp) => (err: unknown) => {
  assert.ok(err instanceof CredentialError, String(err));
  assert.match(err.message, /context "prod"/);
  assert.match(err.message, pattern);
  return true;
};

test('an ExecCredential without a token or a certificate is refused, not sent as anonymous', async (t) => {
  await assert.rejects(setup(t, {}).requestOptions(), refused(/plugin of user "sso" returned neither a token nor a client certificate and key/));
});

test('an ExecCredential without a status is refused with what is missing', async (t) => {
  await assert.rejects(setup(t, undefined).requestOptions(), refused(/plugin of user "sso" returned no status field/));
});

test('an ExecCredential with a certificate and no key is refused', async (t) => {
  await assert.rejects(setup(t, { clientCertificateData: 'x' }).requestOptions(), refused(/returned only a client certificate or key, not both/));
});

test('a token or a certificate and key pass', async (t) => {
  const withToken = await setup(t, { token: 'tok' }).requestOptions();
  assert.equal(withToken.headers.Authorization, 'Bearer tok');
});

test('a plugin that is not installed is named, with its installHint', async (t) => {
  const api = setup(t, {}, { execExtra: ', installHint: "install it with:\\n  brew install sso-login"', command: 'proxyout-no-such-plugin' });
  await assert.rejects(api.requestOptions(), refused(/plugin "proxyout-no-such-plugin" of user "sso" was not found: install it with: brew install sso-login/));
});

test('a plugin that gives no answer fails naming it, and is killed, rather than holding every request for ever', async (t) => {
  // The shell waits for a child that holds its stdout open: killing the shell alone closes nothing.
  const script = '#!/bin/sh\ncd "$(dirname "$0")"\nsleep 30 & echo $! > child\necho $$ > pid\nwait\n';
  const api = setup(t, {}, { script });
  const dir = path.dirname((api as unknown as { kc: { getCurrentUser(): { exec: { command: string } } } }).kc.getCurrentUser().exec.command);
  const started = Date.now();
  await assert.rejects(api.requestOptions(), refused(/plugin "\S+plugin\.sh" of user "sso" gave no answer within 0\.5 s/));
  assert.ok(Date.now() - started < 5_000);
  const [shell, child] = ['pid', 'child'].map((f) => Number(readFileSync(path.join(dir, f), 'utf8')));
  process.kill(child!, 'SIGKILL');
  await new Promise((r) => setTimeout(r, 100));
  assert.throws(() => process.kill(shell!, 0), /ESRCH/, 'the plugin was killed');
});

test('a token or a client certificate beside exec is sent as it is, the plugin never run, as kubectl does', async (t) => {
  const failing = "#!/bin/sh\necho 'error: SSO session expired' >&2\nexit 1\n";
  const withToken = await setup(t, {}, { script: failing, userExtra: 'token: static-token, ' }).requestOptions();
  assert.equal(withToken.headers.Authorization, 'Bearer static-token');
  // A certificate without its key is refused before any plugin runs, as kubectl refuses it.
  assert.throws(() => setup(t, {}, { script: failing, userExtra: 'client-certificate-data: eA==, ' }), /sets a client certificate without its key/);
});

test('a plugin with interactiveMode Always is refused without being run, as kubectl refuses it without a terminal', async (t) => {
  const script =
    '#!/bin/sh\ntouch "$(dirname "$0")/ran"\necho \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}\'\n';
  const api = setup(t, {}, { script, execExtra: ', interactiveMode: Always' });
  await assert.rejects(api.requestOptions(), refused(/plugin "\S+plugin\.sh" of user "sso" has interactiveMode: Always, and the proxy has no terminal/));
  const dir = path.dirname((api as unknown as { kc: { getCurrentUser(): { exec: { command: string } } } }).kc.getCurrentUser().exec.command);
  assert.throws(() => readFileSync(path.join(dir, 'ran')), /ENOENT/, 'the plugin was not run');
  const ifAvailable = await setup(t, {}, { script, execExtra: ', interactiveMode: IfAvailable' }).requestOptions();
  assert.equal(ifAvailable.headers.Authorization, 'Bearer t');
});
