// `reload ID` without --config at connect reads the default config.yaml `connect` read, not the
// one of the reloading shell's $XDG_CONFIG_HOME or HOME (sudo, cron, another user's terminal, a
// shell with another XDG_CONFIG_HOME): that file may route the proxy to another cluster.
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

/** An XDG_CONFIG_HOME whose config.yaml makes `context` the only route. */
function configHome(name: string, context: string): string {
  const dir = path.join(multi.dir, name);
  mkdirSync(path.join(dir, 'kubectl-proxyout'), { recursive: true });
  writeFileSync(
    path.join(dir, 'kubectl-proxyout', 'config.yaml'),
    `routes:\n  - name: ${context}\n    kind: cluster\n    context: ${context}\n    default: true\n`,
  );
  return dir;
}

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  await addWhich(multi.clusters[0]!);
  await addWhich(multi.clusters[1]!);
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-state-'));
  env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir, KUBECONFIG: multi.kubeconfig };
});

after(async () => {
  await runCli(['quit'], { env });
  rmSync(stateDir, { recursive: true, force: true });
  await multi?.close();
});

test('reload from a shell with another XDG_CONFIG_HOME reads the config file connect read', async () => {
  const mine = configHome('mine', 'prod');
  const other = configHome('other', 'staging');
  const r = await runCli(['connect', '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json'], {
    env: { ...env, XDG_CONFIG_HOME: mine },
    timeoutMs: 60_000,
  });
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { id: string; env: Record<string, string> };
  assert.equal(await who(out.env.ALL_PROXY!), 'which-prod');

  const reloaded = await runCli(['reload', out.id], { env: { ...env, XDG_CONFIG_HOME: other }, timeoutMs: 60_000 });
  assert.equal(reloaded.code, 0, reloaded.stderr);
  assert.equal(await who(out.env.ALL_PROXY!), 'which-prod');
});
