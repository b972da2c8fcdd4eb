// A cluster whose API server answers only behind an SSH jump host chain (as managed OpenShift
// clusters' often do): the simulated cluster runs inside the chain's target network namespace, where this
// host has no route; `via: <ssh route>` carries the watches and the port-forward tunnels.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { sshLabUnavailable, startSshLab, type SshLab } from '../helpers/ssh-lab.js';
import { startSimBehindChain, writeViaConfig } from '../helpers/ssh-via-lab.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';

const unavailable = sshLabUnavailable();
let lab: SshLab;
let sim: ChildProcess;
let proxy: ProxyProcess | undefined;
let kubeconfig = '';

before(async () => {
  if (unavailable) return;
  lab = await startSshLab();
  ({ sim, kubeconfig } = await startSimBehindChain(lab));
});

after(async () => {
  await proxy?.stop();
  sim?.kill('SIGTERM');
  await lab?.close();
});

test('a cluster route via an ssh route: names, watches and port-forwards ride the chain', async (t) => {
  if (unavailable) return t.skip(`ssh lab unavailable: ${unavailable}`);
  const { home, config } = await writeViaConfig(lab);
  proxy = await startProxyProcess(['--kubeconfig', kubeconfig, '--config', config, '--listen-socks', '127.0.0.1:0'], {
    env: { HOME: home, SSH_AUTH_SOCK: '' },
  });
  const r = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://web.shop.svc.cluster.local:8080/']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^hello from web-\S+ \(shop\) port 8081/);
  const viaLog = proxy.logs.find((l) => l.msg === 'proxy ready');
  assert.ok(viaLog, 'the proxy started with the hidden cluster ready');
});
