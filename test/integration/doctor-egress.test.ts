// `doctor` reaches the API server the way the proxy does: through a TLS-intercepting corporate
// proxy with --extra-ca or the config file's extra-ca, and through an SSH chain for a cluster route
// `via` an ssh route (the simulated cluster then answers only inside the chain's target network).
// It used to call both API servers unreachable while the proxy worked.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startInterceptingProxy, type InterceptingProxy } from '../helpers/intercepting-proxy.js';
import { sshLabUnavailable, startSshLab, type SshLab } from '../helpers/ssh-lab.js';
import { startSimBehindChain, writeViaConfig } from '../helpers/ssh-via-lab.js';
import { runDoctor } from '../helpers/doctor.js';

const API_HOST = 'api.corp.example';
let cluster: TestCluster;
let corp: InterceptingProxy;
let corpKubeconfig = '';
let caFile = '';
let n = 0;

before(async () => {
  cluster = await startTestCluster();
  corp = await startInterceptingProxy({ port: Number(new URL(cluster.sim.server).port), caPem: cluster.sim.caPem });
  corpKubeconfig = path.join(cluster.dir, 'kubeconfig-corp');
  await writeFile(corpKubeconfig, cluster.sim.kubeconfigYaml({ server: `https://${API_HOST}:6443`, namespace: 'shop' }), { mode: 0o600 });
  caFile = path.join(cluster.dir, 'corp-ca.pem');
  await writeFile(caFile, corp.caPem);
});
after(async () => {
  await corp?.close();
  await cluster?.close();
});

function doctor(args: string[], env: NodeJS.ProcessEnv) {
  return runDoctor(args, path.join(cluster.dir, `state-${++n}`), env);
}

test('behind a TLS-intercepting proxy: --extra-ca (or the config file extraCA) makes every cluster check pass, through the proxy', async () => {
  const env = { HTTPS_PROXY: corp.url, NO_PROXY: '' };
  const without = await doctor(['--kubeconfig', corpKubeconfig], env);
  assert.equal(without.code, 1);
  assert.equal(without.get('api-server').status, 'fail');
  assert.match(without.get('api-server').fix ?? '', /--extra-ca FILE/, 'the fix names the flag');

  const before = corp.intercepted;
  const r = await doctor(['--kubeconfig', corpKubeconfig, '--extra-ca', caFile], env);
  for (const name of ['kubeconfig', 'api-server', 'rbac', 'port-forward']) assert.equal(r.get(name).status, 'ok', JSON.stringify(r.get(name)));
  assert.ok(r.get('api-server').detail.includes(`via proxy ${corp.url} (HTTPS_PROXY), extra CA ${caFile}`), r.get('api-server').detail);
  assert.match(r.get('port-forward').detail, /SPDY over WebSocket: yes; per-stream WebSocket v4: yes/);
  assert.ok(corp.intercepted > before, 'the requests went through the intercepting proxy');

  const config = path.join(cluster.dir, 'corp.yaml');
  await writeFile(config, [`extra-ca: ${caFile}`, 'routes:', '  - name: corp', '    kind: cluster', '    context: sim', ''].join('\n'));
  const fromFile = await doctor(['--kubeconfig', corpKubeconfig, '--config', config], env);
  assert.equal(fromFile.get('api-server').status, 'ok', JSON.stringify(fromFile.get('api-server')));
  assert.equal(fromFile.get('api-server').scope, 'corp');

  const missing = await doctor(['--kubeconfig', corpKubeconfig, '--extra-ca', path.join(cluster.dir, 'no-such-ca.pem')], env);
  assert.equal(missing.code, 1);
  assert.equal(missing.get('extra-ca').status, 'fail');
  assert.match(missing.get('extra-ca').detail, /cannot read the extra CA bundle .*no-such-ca\.pem: ENOENT/);
});

test('a kubeconfig CA that did not sign the server certificate (no proxy): the fix names the kubeconfig CA and the extra-ca key, with or without --extra-ca', async () => {
  // The cluster's CA replaced by another (the intercepting proxy's): a cluster rebuilt, a CA rotated.
  const yaml = cluster.sim
    .kubeconfigYaml()
    .replace(/certificate-authority-data: .*/, `certificate-authority-data: ${Buffer.from(corp.caPem).toString('base64')}`);
  const wrongCA = path.join(cluster.dir, 'kubeconfig-wrong-ca');
  await writeFile(wrongCA, yaml, { mode: 0o600 });
  const env = { HTTPS_PROXY: '', NO_PROXY: '' };
  const plain = await doctor(['--kubeconfig', wrongCA], env);
  assert.equal(plain.code, 1);
  const api = plain.get('api-server');
  assert.match(api.detail, /unable to verify|self[- ]signed/i);
  assert.match(
    api.fix ?? '',
    /^TLS verification failed: the server's certificate is not signed by the CA the kubeconfig gives for cluster \S+ \(certificate-authority or certificate-authority-data\): get a current kubeconfig .*--extra-ca FILE \(config: extra-ca\)$/,
  );
  // An extra CA that does not sign it either: still TLS, not "cannot be reached".
  const withExtra = await doctor(['--kubeconfig', wrongCA, '--extra-ca', caFile], env);
  assert.match(
    withExtra.get('api-server').fix ?? '',
    new RegExp(`^TLS verification failed: .* nor by the extra CA ${caFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `),
  );
});

const unavailable = sshLabUnavailable();

test('a cluster route via an ssh route: doctor reaches its API server through the chain', async (t) => {
  if (unavailable) return t.skip(`ssh lab unavailable: ${unavailable}`);
  let lab: SshLab | undefined;
  let sim: ChildProcess | undefined;
  try {
    lab = await startSshLab();
    let kubeconfig: string;
    ({ sim, kubeconfig } = await startSimBehindChain(lab));
    const { home, config } = await writeViaConfig(lab);

    const r = await doctor(['--kubeconfig', kubeconfig, '--config', config], { HOME: home, SSH_AUTH_SOCK: '' });
    const api = r.get('api-server');
    assert.equal(api.scope, 'hidden');
    assert.equal(api.status, 'ok', JSON.stringify(api));
    assert.match(api.detail, /through route jump/);
    assert.equal(r.get('rbac').status, 'ok', JSON.stringify(r.get('rbac')));
    assert.equal(r.get('port-forward').status, 'ok', JSON.stringify(r.get('port-forward')));

    // A chain that cannot start (no usable key): the API check says so, with the ssh fix.
    await writeFile(path.join(home, '.ssh', 'config'), 'Host jump2\n  HostName 192.0.2.1\n  ProxyCommand nc %h %p\n');
    const broken = await doctor(['--kubeconfig', kubeconfig, '--config', config], { HOME: home, SSH_AUTH_SOCK: '' });
    assert.equal(broken.code, 1);
    assert.equal(broken.get('api-server').status, 'fail');
    assert.match(broken.get('api-server').detail, /route jump/);
  } finally {
    sim?.kill('SIGTERM');
    await lab?.close();
  }
});
