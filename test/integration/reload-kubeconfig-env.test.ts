// `reload ID` makes a managed proxy's table again from the kubeconfig it was connected with, also
// when that came from $KUBECONFIG: a reload from another shell — whose KUBECONFIG names another
// team's files, where a context of the same name is another cluster, or names none — must not
// move the proxy there; nor, without KUBECONFIG, one whose HOME has another ~/.kube/config.
// Real CLI, real curl, two simulated clusters.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { runCli } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';

let multi: MultiCluster;
let stateDir: string;
let env: NodeJS.ProcessEnv;

const who = async (proxyUrl: string) => {
  const r = await curl(['-sS', '--max-time', '10', '--proxy', proxyUrl, 'http://which/']);
  return r.code === 0 ? /hello from (\S+) \(/.exec(r.stdout)?.[1] : `curl ${r.code}: ${r.stderr}`;
};

/** A team's directory whose `config` names the given cluster's context "prod". */
function team(name: string, cluster: number): string {
  const dir = path.join(multi.dir, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'config'), multi.clusters[cluster]!.sim.kubeconfigYaml({ context: 'prod', namespace: 'shop' }), { mode: 0o600 });
  return dir;
}

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  await addWhich(multi.clusters[0]!);
  await addWhich(multi.clusters[1]!);
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-state-'));
  env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir, XDG_CONFIG_HOME: path.join(multi.dir, 'no-config') };
});

after(async () => {
  await runCli(['quit'], { env });
  rmSync(stateDir, { recursive: true, force: true });
  await multi?.close();
});

test('reload from a shell with another KUBECONFIG, or none, keeps the files the proxy was connected with', async () => {
  const a = team('team-a', 0);
  const b = team('team-b', 1);
  // A relative KUBECONFIG, as direnv or a shell in the team's directory sets it.
  const r = await runCli(['connect', '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json'], {
    env: { ...env, KUBECONFIG: 'config' },
    cwd: a,
    timeoutMs: 60_000,
  });
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { id: string; env: Record<string, string> };
  assert.equal(await who(out.env.ALL_PROXY!), 'which-prod');

  const fromB = await runCli(['reload', out.id], { env: { ...env, KUBECONFIG: path.join(b, 'config') }, cwd: b, timeoutMs: 60_000 });
  assert.equal(fromB.code, 0, fromB.stderr);
  assert.equal(await who(out.env.ALL_PROXY!), 'which-prod');

  const elsewhere = await runCli(['reload', out.id], { env: { ...env, KUBECONFIG: undefined, HOME: multi.dir }, cwd: tmpdir(), timeoutMs: 60_000 });
  assert.equal(elsewhere.code, 0, elsewhere.stderr);
  assert.equal(await who(out.env.ALL_PROXY!), 'which-prod');
});

test('reload from a shell with another HOME keeps the ~/.kube/config the proxy was connected with', async () => {
  // Without KUBECONFIG, as kubectl: ~/.kube/config of the HOME connect ran with (sudo, su and
  // cron may give the reloading shell another).
  const home = (name: string, cluster: number) => {
    const dir = team(name, cluster);
    mkdirSync(path.join(dir, '.kube'), { recursive: true });
    writeFileSync(path.join(dir, '.kube', 'config'), multi.clusters[cluster]!.sim.kubeconfigYaml({ context: 'prod', namespace: 'shop' }), { mode: 0o600 });
    return dir;
  };
  const a = home('home-a', 0);
  const b = home('home-b', 1);
  const r = await runCli(['connect', '--id', 'home', '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json'], {
    env: { ...env, KUBECONFIG: undefined, HOME: a },
    timeoutMs: 60_000,
  });
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { id: string; env: Record<string, string> };
  assert.equal(await who(out.env.ALL_PROXY!), 'which-prod');

  const fromB = await runCli(['reload', out.id], { env: { ...env, KUBECONFIG: undefined, HOME: b }, timeoutMs: 60_000 });
  assert.equal(fromB.code, 0, fromB.stderr);
  assert.equal(await who(out.env.ALL_PROXY!), 'which-prod');
});
