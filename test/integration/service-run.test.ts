// The unit service-install writes, run as systemd would run it: its ExecStart, in its
// WorkingDirectory, with only its Environment= (and HOME) — against a simulated cluster. The
// service serves the routing table it was installed with: a --config file given relative to the
// installing shell, port mappings and --no-direct (its ExecReload makes it read the edited file);
// and, with no --config, the default config.yaml this shell would read ($XDG_CONFIG_HOME/kubectl-proxyout/config.yaml), which a service manager
// that starts the service without $XDG_CONFIG_HOME would not find.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';

const linux = { skip: process.platform !== 'linux' ? 'service-install writes a systemd unit on Linux only' : false };
let cluster: TestCluster;
let home: string;

before(async () => {
  if (linux.skip) return;
  cluster = await startTestCluster();
  home = mkdtempSync(path.join(os.tmpdir(), 'proxyout-svc-run-'));
});

after(async () => {
  await cluster?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

/** ExecStart's words, WorkingDirectory and Environment= of a unit whose values need no quoting. */
function unitOf(text: string): { command: string[]; cwd: string; env: Record<string, string> } {
  const line = (key: string) =>
    text
      .split('\n')
      .filter((l) => l.startsWith(`${key}=`))
      .map((l) => l.slice(key.length + 1));
  const [exec] = line('ExecStart');
  assert.ok(exec && !exec.includes('"'), `an ExecStart this test can split: ${exec}`);
  const env: Record<string, string> = {};
  for (const assignment of line('Environment')) {
    const at = assignment.indexOf('=');
    env[assignment.slice(0, at)] = assignment.slice(at + 1);
  }
  return { command: exec.split(' '), cwd: line('WorkingDirectory')[0]!, env };
}

/** Runs the unit as the service manager would: nothing of this shell's environment but HOME. */
async function runUnit(text: string) {
  const unit = unitOf(text);
  const cleared: Record<string, string> = {};
  for (const k of ['KUBECONFIG', 'XDG_CONFIG_HOME', 'XDG_STATE_HOME', 'KUBECTL_PROXYOUT_STATE_DIR', 'ALL_PROXY', 'HTTPS_PROXY', 'HTTP_PROXY', 'NO_PROXY'])
    cleared[k] = '';
  return startProxyProcess([], { command: unit.command, cwd: unit.cwd, env: { ...cleared, HOME: home, ...unit.env } });
}

async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, '127.0.0.1');
  await new Promise((r) => s.once('listening', r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

test('a --config given relative to the installing shell, --forward and --no-direct: the service serves that table', linux, async () => {
  const work = path.join(home, 'work');
  mkdirSync(work, { recursive: true });
  writeFileSync(path.join(work, 'proxy.yaml'), 'routes:\n  - { name: lab, kind: cluster, context: sim }\n');
  const port = await freePort();
  const installed = await runCli(
    [
      'service-install',
      '--dry-run',
      '--kubeconfig',
      cluster.kubeconfig,
      '--config',
      'proxy.yaml',
      '--listen-socks',
      '127.0.0.1:0',
      '--forward',
      `127.0.0.1:${port}=web.shop.svc.lab:8080`,
      '--no-direct',
      '--transport',
      'websocket',
      '--connect-timeout',
      '20s',
    ],
    { cwd: work, env: { HOME: home, XDG_CONFIG_HOME: '', KUBECTL_PROXYOUT_STATE_DIR: path.join(home, 'state') } },
  );
  assert.equal(installed.code, 0, installed.stderr);
  assert.match(
    installed.stdout,
    new RegExp(`--config ${path.join(work, 'proxy.yaml').replace(/\./g, '\\.')} --no-direct --forward 127\\.0\\.0\\.1:${port}=web\\.shop\\.svc\\.lab:8080 `),
  );
  assert.match(installed.stdout, / --connect-timeout 20s --transport websocket --log-format json$/m, 'the tuning flags given, and no defaults');
  const proxy = await runUnit(installed.stdout);
  try {
    const viaRoute = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://web.shop.svc.lab:8080/whoami']);
    assert.equal(viaRoute.code, 0, viaRoute.stderr);
    assert.match(viaRoute.stdout, /"namespace":"shop"/);
    // --transport websocket reached the service: its stream went over a per-stream WebSocket.
    assert.ok(
      proxy.logs.some((l) => l.msg === 'stream open' && l.target === 'web.shop.svc.lab:8080') && !proxy.logs.some((l) => l.transport === 'spdy'),
      JSON.stringify(proxy.logs.filter((l) => l.transport)),
    );
    const viaMapping = await curl([`http://127.0.0.1:${port}/whoami`]);
    assert.equal(viaMapping.code, 0, viaMapping.stderr);
    assert.match(viaMapping.stdout, /"namespace":"shop"/);
    // --no-direct: a name no route claims is refused, not dialled from this machine.
    const refused = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://example.invalid/']);
    assert.equal(refused.code, 97, refused.stderr);
    // The unit's ExecReload (what `systemctl --user reload` runs) makes it read the edited file.
    writeFileSync(path.join(work, 'proxy.yaml'), 'routes:\n  - { name: lab-b, kind: cluster, context: sim }\n');
    const reload = /^ExecReload=(.*)$/m.exec(installed.stdout)?.[1];
    assert.equal(reload, '/bin/kill -HUP $MAINPID');
    execFileSync('sh', ['-c', reload!.replace('$MAINPID', String(proxy.proc.pid))]);
    await eventually(async () => proxy.logs.some((l) => l.msg === 'routing table reloaded'), 10_000, 50);
    const renamed = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://web.shop.svc.lab-b:8080/whoami']);
    assert.equal(renamed.code, 0, renamed.stderr);
  } finally {
    assert.equal(await proxy.stop(), 0);
  }
});

test('no --config: the service reads the config.yaml this shell would ($XDG_CONFIG_HOME kept); a broken one is refused at install', linux, async () => {
  const xdg = path.join(home, 'xdg');
  mkdirSync(path.join(xdg, 'kubectl-proxyout'), { recursive: true });
  const configFile = path.join(xdg, 'kubectl-proxyout', 'config.yaml');
  writeFileSync(configFile, 'routes: [oops\n');
  const env = { HOME: home, XDG_CONFIG_HOME: xdg, KUBECTL_PROXYOUT_STATE_DIR: path.join(home, 'state') };
  const broken = await runCli(['service-install', '--dry-run', '--name', 'xdg', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0'], { env });
  assert.equal(broken.code, 1, broken.stdout);
  assert.match(broken.stderr, new RegExp(`^Error: .*${configFile.replace(/\./g, '\\.')}`));
  writeFileSync(configFile, 'routes:\n  - { name: lab2, kind: cluster, context: sim }\n');
  const installed = await runCli(['service-install', '--dry-run', '--name', 'xdg', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0'], {
    env,
  });
  assert.equal(installed.code, 0, installed.stderr);
  assert.match(installed.stdout, new RegExp(`^Environment=XDG_CONFIG_HOME=${xdg.replace(/\./g, '\\.')}$`, 'm'));
  const proxy = await runUnit(installed.stdout);
  try {
    const r = await curl(['--proxy', `socks5h://${proxy.socks}`, 'http://web.shop.svc.lab2:8080/whoami']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /"namespace":"shop"/);
  } finally {
    assert.equal(await proxy.stop(), 0);
  }
});
