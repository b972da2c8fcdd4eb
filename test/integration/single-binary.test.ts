// The single executable from `npm run package`, copied alone into an empty directory and run with
// a PATH that has no node: help, a foreground proxy carrying curl into the simulated cluster, and
// a managed proxy whose daemon is the binary itself (re-executed, not node).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { exeSuffix, packagedBinary, skipUnlessPackaged } from '../helpers/package.js';
import { statusItem } from '../helpers/status-json.js';
import { isAlive } from '../../src/state/process.js';

const skip = skipUnlessPackaged(packagedBinary);
let cluster: TestCluster;
let binary: string;
let env: NodeJS.ProcessEnv;

before(async () => {
  if (skip) return;
  cluster = await startTestCluster();
  const dir = path.join(cluster.dir, 'empty');
  const emptyPath = path.join(cluster.dir, 'no-node-bin');
  mkdirSync(dir);
  mkdirSync(emptyPath);
  binary = path.join(dir, `kubectl-proxyout${exeSuffix}`);
  copyFileSync(packagedBinary, binary);
  env = { PATH: emptyPath, HOME: dir, KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state'), NODE_PATH: '', NODE_OPTIONS: '' };
});

after(async () => {
  await cluster?.close();
});

function run(args: string[], file = binary): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { env, cwd: path.dirname(binary), encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

test('--help runs from an empty directory with no node on PATH', { skip }, async () => {
  const r = await run(['--help']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^USAGE\n {2}\$ kubectl proxyout \[flags\]/m);
  assert.match(r.stdout, /doctor/);
  assert.equal(r.stderr, '', 'no warning (engine check, SEA require)');
  const v = await run(['doctor', '--help']);
  assert.equal(v.code, 0, v.stderr);
});

test('a foreground proxy from the binary carries curl into the simulated cluster', { skip }, async () => {
  const p = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0'], {
    command: [binary],
    env,
    cwd: path.dirname(binary),
  });
  try {
    await eventually(async () => p.logs.some((l) => l.msg === 'proxy ready'), 5_000, 50);
    const r = await curl(['--proxy', `socks5h://${p.socks}`, 'http://web.shop:8080/']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /hello from web-/);
  } finally {
    assert.equal(await p.stop('SIGINT'), 0);
  }
});

test('connect: the managed daemon is the binary itself, and status/disconnect manage it', { skip }, async () => {
  const c = await run(['connect', '--socks', '--no-proxy-auth', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--json']);
  assert.equal(c.code, 0, c.stderr);
  const { id, pid, socks } = JSON.parse(c.stdout) as { id: string; pid: number; socks: string };
  try {
    if (process.platform === 'linux') {
      assert.equal(readlinkSync(`/proc/${pid}/exe`), binary, 'the daemon runs the binary, not node');
      assert.deepEqual(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).slice(1), ['daemon', '--id', id]);
    }
    const r = await curl(['--proxy', `socks5h://${socks}`, 'http://web.shop:8080/']);
    assert.equal(r.code, 0, r.stderr);
    const s = await run(['status', id, '--json']);
    assert.equal(s.code, 0, s.stderr);
    assert.equal(statusItem<{ state: string }>(s.stdout).state, 'running');
  } finally {
    const d = await run(['disconnect', id]);
    assert.equal(d.code, 0, d.stderr);
  }
});

test('a renamed binary (kubectl-pxy) still knows its daemon: status says running, disconnect stops it', { skip }, async () => {
  const renamed = path.join(path.dirname(binary), `kubectl-pxy${exeSuffix}`);
  copyFileSync(binary, renamed);
  const c = await run(
    ['connect', '--no-proxy-auth', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--json', '--id', 'renamed'],
    renamed,
  );
  assert.equal(c.code, 0, c.stderr);
  const { pid } = JSON.parse(c.stdout) as { pid: number };
  try {
    const s = await run(['status', 'renamed', '--json'], renamed);
    assert.equal(s.code, 0, s.stderr);
    assert.equal(statusItem<{ state: string }>(s.stdout).state, 'running', 'not taken for dead, its kubeconfig removed');
  } finally {
    const d = await run(['disconnect', 'renamed'], renamed);
    assert.equal(d.code, 0, d.stderr);
    assert.doesNotMatch(d.stdout, /was not running/);
    const stopped = await eventually(async () => !isAlive(pid), 2_000, 50).then(
      () => true,
      () => false,
    );
    if (!stopped) process.kill(pid, 'SIGKILL');
    assert.ok(stopped, 'disconnect stopped the daemon');
  }
});
