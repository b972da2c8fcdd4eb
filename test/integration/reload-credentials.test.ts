// A reload after the kubeconfig's credentials were edited (a revoked token replaced, as with
// `kubectl config set-credentials`) makes the route anew with them, though the table is the same:
// kubectl uses the edit at once. A reload with nothing edited keeps the route (no new watches).
// Foreground (SIGHUP) and managed (`reload ID`); real CLI and curl against the simulated cluster.
// A foreground proxy whose token is refused takes a renewed one from the kubeconfig by itself.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';

let cluster: TestCluster;
let stateDir: string;
let env: NodeJS.ProcessEnv;

before(async () => {
  cluster = await startTestCluster();
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-state-'));
  env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir, XDG_CONFIG_HOME: path.join(cluster.dir, 'no-config') };
});

after(async () => {
  await runCli(['quit'], { env });
  rmSync(stateDir, { recursive: true, force: true });
  await cluster?.close();
});

/** A kubeconfig of its own with a token of its own. */
async function kubeconfigWithToken(name: string): Promise<{ file: string; token: string }> {
  const token = cluster.sim.issueToken();
  const file = path.join(cluster.dir, name);
  await cluster.sim.writeKubeconfig(file, { namespace: 'shop', token });
  return { file, token };
}

/** The token revoked, and the kubeconfig given a new one (what `kubectl config set-credentials --token` does). */
function replaceToken(file: string, token: string): void {
  cluster.sim.revokeToken(token);
  writeFileSync(file, readFileSync(file, 'utf8').replace(token, cluster.sim.issueToken()), { mode: 0o600 });
}

const get = async (proxyUrl: string, url: string) => {
  const r = await curl(['-sS', '--max-time', '10', '--proxy', proxyUrl, url]);
  return r.code === 0 ? 'ok' : `curl ${r.code}: ${r.stderr.trim()}`;
};

test('SIGHUP after the token was replaced in the kubeconfig: the route is made anew with it; with no edit it is kept', async () => {
  const { file, token } = await kubeconfigWithToken('kubeconfig-foreground');
  const proxy = await startProxyProcess(['--kubeconfig', file, '--listen-socks', '127.0.0.1:0'], { env });
  const reload = async () => {
    const mark = proxy.logs.length;
    proxy.proc.kill('SIGHUP');
    return eventually(async () => proxy.logs.slice(mark).find((l) => /routing table reloaded|reload failed/.test(String(l.msg))), 10_000, 50);
  };
  try {
    const url = `socks5h://${proxy.socks}`;
    assert.equal(await get(url, 'http://api.shop/'), 'ok');
    const untouched = await reload();
    assert.deepEqual(untouched.added, [], 'nothing edited: the route is kept');
    replaceToken(file, token);
    const edited = await reload();
    assert.equal(edited.msg, 'routing table reloaded', JSON.stringify(edited));
    assert.deepEqual(edited.added, ['sim']);
    // A pod not tunnelled to before: a new port-forward, with the new token.
    assert.equal(await get(url, 'http://hello.default/'), 'ok');
  } finally {
    assert.equal(await proxy.stop(), 0);
  }
});

test('no reload: a token the API server refuses, replaced in the kubeconfig (as `oc login` rewrites it), is used within seconds', async () => {
  const { file, token } = await kubeconfigWithToken('kubeconfig-relogin');
  const proxy = await startProxyProcess(['--kubeconfig', file, '--listen-socks', '127.0.0.1:0'], { env });
  try {
    const url = `socks5h://${proxy.socks}`;
    assert.equal(await get(url, 'http://api.shop/'), 'ok');
    replaceToken(file, token);
    // A pod not tunnelled to before: refused with the token the proxy read at start…
    assert.match(await get(url, 'http://hello.default/'), /^curl/);
    // …then served with the kubeconfig's new one, as kubectl would be, without a reload.
    await eventually(async () => (await get(url, 'http://hello.default/')) === 'ok', 10_000, 250);
    assert.ok(proxy.logs.some((l) => /the kubeconfig has new ones/.test(String(l.msg))));
  } finally {
    assert.equal(await proxy.stop(), 0);
  }
});

test('reload ID after the token was replaced in the kubeconfig: the managed proxy uses the new one', async () => {
  const { file, token } = await kubeconfigWithToken('kubeconfig-managed');
  const r = await runCli(['connect', '--kubeconfig', file, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json'], { env, timeoutMs: 60_000 });
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { id: string; env: Record<string, string> };
  assert.equal(await get(out.env.ALL_PROXY!, 'http://api.shop/'), 'ok');
  replaceToken(file, token);
  const reloaded = await runCli(['reload', out.id], { env, timeoutMs: 60_000 });
  assert.equal(reloaded.code, 0, reloaded.stderr);
  assert.equal(await get(out.env.ALL_PROXY!, 'http://hello.default/'), 'ok');
});

test('no reload: a managed proxy whose token is refused takes the one the user renewed in the kubeconfig, within seconds', async () => {
  const { file, token } = await kubeconfigWithToken('kubeconfig-managed-relogin');
  const r = await runCli(['connect', '--id', 'relogin', '--kubeconfig', file, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json'], {
    env,
    timeoutMs: 60_000,
  });
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { id: string; env: Record<string, string> };
  assert.equal(await get(out.env.ALL_PROXY!, 'http://api.shop/'), 'ok');
  // It runs from its own copy of the kubeconfig; the user logs in again in theirs.
  replaceToken(file, token);
  assert.match(await get(out.env.ALL_PROXY!, 'http://hello.default/'), /^curl/, 'refused with the old token first');
  await eventually(async () => (await get(out.env.ALL_PROXY!, 'http://hello.default/')) === 'ok', 15_000, 250);
  const logs = await runCli(['logs', out.id], { env });
  assert.match(logs.stdout, /the kubeconfig has new ones/);
  assert.equal((await runCli(['disconnect', out.id], { env })).code, 0);
});

test('reload ID after the kubeconfig names another identity: connect with it is "already running", not "other credentials"', async () => {
  const { file } = await kubeconfigWithToken('kubeconfig-new-identity');
  const args = ['connect', '--id', 'identity', '--kubeconfig', file, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json'];
  const r = await runCli(args, { env, timeoutMs: 60_000 });
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { id: string; env: Record<string, string> };
  // The same context, server and namespace, now with an exec plugin: another identity (as
  // `aws eks update-kubeconfig --role-arn` rewrites the entry), which the reload takes.
  await cluster.sim.writeKubeconfig(file, { namespace: 'shop', auth: 'exec' });
  const reloaded = await runCli(['reload', out.id], { env, timeoutMs: 60_000 });
  assert.equal(reloaded.code, 0, reloaded.stderr);
  assert.equal(await get(out.env.ALL_PROXY!, 'http://hello.default/'), 'ok');
  // The proxy runs as the kubeconfig says now: connect with it reports it, as it would one just started.
  const again = await runCli(args, { env, timeoutMs: 60_000 });
  assert.equal(again.code, 0, again.stderr);
  assert.equal((JSON.parse(again.stdout) as { id: string }).id, out.id);
  assert.equal((await runCli(['disconnect', out.id], { env })).code, 0);
});
