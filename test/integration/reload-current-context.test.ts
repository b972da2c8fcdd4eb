// A proxy started without --context or a table serves the kubeconfig's current context. A reload
// reads the kubeconfig again for its credentials, but serves that same context: a
// `kubectl config use-context` made meanwhile (to look at another cluster) must not move the
// proxy there — for a managed one, not under an ID and a status that still name the first.
// Real CLI, real kubectl and curl, two simulated clusters.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { eventually } from '../helpers/cluster.js';
import { curl } from '../helpers/curl.js';

let multi: MultiCluster;
let kubeconfig: string;
let stateDir: string;
// No default config file: the table is the current context alone.
let env: NodeJS.ProcessEnv;

const useContext = (context: string) => execFileSync('kubectl', ['config', 'use-context', context, '--kubeconfig', kubeconfig], { stdio: 'ignore' });
const who = async (proxyUrl: string) => {
  const r = await curl(['-sS', '--max-time', '10', '--proxy', proxyUrl, 'http://which/']);
  return r.code === 0 ? /hello from (\S+) \(/.exec(r.stdout)?.[1] : `curl ${r.code}: ${r.stderr}`;
};

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  await addWhich(multi.clusters[0]!);
  await addWhich(multi.clusters[1]!);
  kubeconfig = path.join(multi.dir, 'kubeconfig-current');
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-state-'));
  env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir, XDG_CONFIG_HOME: path.join(multi.dir, 'no-config') };
});

after(async () => {
  await runCli(['quit'], { env });
  rmSync(stateDir, { recursive: true, force: true });
  await multi?.close();
});

test('SIGHUP: the foreground proxy keeps serving the context that was current at its start', async () => {
  await copyFile(multi.kubeconfig, kubeconfig);
  useContext('prod');
  const proxy = await startProxyProcess(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0'], { env });
  try {
    const url = `socks5h://${proxy.socks}`;
    assert.equal(await who(url), 'which-prod');
    useContext('staging');
    const mark = proxy.logs.length;
    proxy.proc.kill('SIGHUP');
    const done = await eventually(async () => proxy.logs.slice(mark).find((l) => /routing table reloaded|reload failed/.test(String(l.msg))), 10_000, 50);
    assert.equal(done.msg, 'routing table reloaded', JSON.stringify(done));
    assert.deepEqual(done.routes, ['prod']);
    assert.equal(await who(url), 'which-prod');
  } finally {
    assert.equal(await proxy.stop(), 0);
  }
});

test('reload ID: a managed proxy connected without a context keeps the one its ID and status name', async () => {
  await copyFile(multi.kubeconfig, kubeconfig);
  useContext('prod');
  const r = await runCli(['connect', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json'], { env, timeoutMs: 60_000 });
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { id: string; context: string; env: Record<string, string> };
  assert.equal(out.context, 'prod');
  assert.equal(await who(out.env.ALL_PROXY!), 'which-prod');
  useContext('staging');
  const reloaded = await runCli(['reload', out.id], { env, timeoutMs: 60_000 });
  assert.equal(reloaded.code, 0, reloaded.stderr);
  assert.match(reloaded.stdout, /route prod \(cluster prod, default\)/);
  assert.equal(await who(out.env.ALL_PROXY!), 'which-prod');
});
