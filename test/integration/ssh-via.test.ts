// A cluster whose API server answers only behind an SSH jump host chain (as managed OpenShift
// clusters' often do): the simulated cluster runs inside the chain's target network namespace, where this
// host has no route; `via: <ssh route>` carries the watches and the port-forward tunnels.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sshLabUnavailable, startSshLab, TARGET, type SshLab } from '../helpers/ssh-lab.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';

const unavailable = sshLabUnavailable();
const SIM_MAIN = fileURLToPath(new URL('../sim/main.js', import.meta.url));
let lab: SshLab;
let sim: ChildProcess;
let proxy: ProxyProcess | undefined;
let kubeconfig = '';

before(async () => {
  if (unavailable) return;
  lab = await startSshLab();
  // The simulated cluster inside the target's namespace, on the target's address.
  sim = spawn('ip', ['netns', 'exec', lab.namespaces.c, process.execPath, SIM_MAIN, path.join(lab.dir, 'kubeconfig')], {
    env: { ...process.env, SIM_HOST: TARGET.ip, SIM_PORT: '6443' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: sim.stdout! }).once('line', resolve);
    sim.once('exit', (code) => reject(new Error(`the simulated cluster exited (${code})`)));
  });
  kubeconfig = (JSON.parse(line) as { kubeconfig: string }).kubeconfig;
});

after(async () => {
  await proxy?.stop();
  sim?.kill('SIGTERM');
  await lab?.close();
});

test('a cluster route via an ssh route: names, watches and port-forwards ride the chain', async (t) => {
  if (unavailable) return t.skip(`ssh lab unavailable: ${unavailable}`);
  // ~/.ssh of a home of our own: the key, the hosts' keys, the chain jump1 → jump2.
  const home = path.join(lab.dir, 'home');
  await mkdir(path.join(home, '.ssh'), { recursive: true, mode: 0o700 });
  const knownHosts = path.join(home, '.ssh', 'known_hosts');
  await writeFile(knownHosts, `${lab.knownHostsLines.jump1}\n${lab.knownHostsLines.jump2}\n`);
  await copyFile(lab.writeConfig('via', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${knownHosts}`] }), path.join(home, '.ssh', 'config'));
  const config = path.join(lab.dir, 'proxyout.yaml');
  await writeFile(
    config,
    [
      'routes:',
      '  - name: jump',
      '    kind: ssh',
      '    ssh: { host: jump2 }',
      '  - name: hidden',
      '    kind: cluster',
      '    context: sim',
      '    default: true',
      '    via: jump',
      '',
    ].join('\n'),
  );
  proxy = await startProxyProcess(['--kubeconfig', kubeconfig, '--config', config, '--listen-socks', '127.0.0.1:0'], {
    env: { HOME: home, SSH_AUTH_SOCK: '' },
  });
  const r = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://web.shop.svc.cluster.local:8080/']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^hello from web-\S+ \(shop\) port 8081/);
  const viaLog = proxy.logs.find((l) => l.msg === 'proxy ready');
  assert.ok(viaLog, 'the proxy started with the hidden cluster ready');
});
