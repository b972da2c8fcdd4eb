// SOCKS unix sockets whose path a URL cannot carry raw: a state directory with a space (macOS's
// ~/Library/Application Support) or non-ASCII letters (which curl cannot take at all) puts `unix:`
// sockets in a private directory under $TMPDIR; a path given explicitly is percent-encoded. The
// ALL_PROXY the ready lines export and `exec` hands CMD must be a URL real curl takes, and the
// export lines must survive a real shell.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { lstatSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { isAlive } from '../../src/state/process.js';

let cluster: TestCluster;
let stateDir: string;
let tmp: string;
let socketDir: string;
const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: stateDir, TMPDIR: tmp });

before(async () => {
  cluster = await startTestCluster();
  // A space, a non-ASCII letter and a '%' (a URL escape of its own); short: socket paths are limited.
  stateDir = mkdtempSync(path.join(tmpdir(), 'px Sü%-'));
  // Our own $TMPDIR: the default sockets of these proxies go there, not into a shared /tmp.
  tmp = mkdtempSync(path.join(tmpdir(), 'pxt-'));
  socketDir = path.join(tmp, `kubectl-proxyout-${process.getuid!()}`);
});

after(async () => {
  await runCli(['quit'], { env: env() }).catch(() => undefined);
  await cluster?.close();
  rmSync(stateDir, { recursive: true, force: true });
  rmSync(tmp, { recursive: true, force: true });
});

/** Runs a script in a real POSIX shell (no proxy variables of ours); resolves with its exit code and output. */
function sh(script: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const clean = { ...process.env };
  for (const k of ['ALL_PROXY', 'all_proxy', 'HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'NO_PROXY', 'no_proxy']) delete clean[k];
  return new Promise((resolve) => {
    execFile('sh', ['-c', script], { env: clean, encoding: 'utf8' }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, stdout, stderr });
    });
  });
}

const CURL_WHOAMI = 'curl --silent --show-error --max-time 20 http://web.shop:8080/whoami';

/** The foreground proxy's export line for ALL_PROXY, pasted into sh before a curl that reads it. */
async function curlThroughExportLine(stdout: string[]): Promise<void> {
  const line = stdout.find((l) => l.startsWith('export ALL_PROXY='));
  assert.ok(line, stdout.join('\n'));
  const r = await sh(`${line}\n${CURL_WHOAMI}`);
  assert.equal(r.code, 0, `${line}\n${r.stderr}`);
  assert.match(r.stdout, /"namespace":"shop"/);
}

test('unix: with such a state directory: the socket is in a private directory under $TMPDIR; the exported line works in sh with curl', async () => {
  const proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', 'unix:'], { env: env() });
  try {
    const socket = path.join(socketDir, 'socks.sock');
    assert.ok(lstatSync(socket).isSocket(), proxy.stdout.join('\n'));
    assert.equal(statSync(socketDir).mode & 0o777, 0o700);
    assert.ok(proxy.stdout.includes(`export ALL_PROXY=socks5h://localhost${socket}`), proxy.stdout.join('\n'));
    await curlThroughExportLine(proxy.stdout);
  } finally {
    await proxy.stop();
  }
});

test('an explicit unix:PATH with a space and a "%" stays where it was asked; its URL is percent-encoded and works in sh with curl', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'px 50%-'));
  const socket = path.join(dir, 's.sock');
  const proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', `unix:${socket}`], { env: env() });
  try {
    assert.ok(lstatSync(socket).isSocket());
    assert.ok(
      proxy.stdout.some((l) => l.startsWith('export ALL_PROXY=socks5h://localhost/') && l.includes('%20') && l.includes('%25')),
      proxy.stdout.join('\n'),
    );
    await curlThroughExportLine(proxy.stdout);
  } finally {
    await proxy.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a managed proxy: connect’s export line and exec’s ALL_PROXY both reach it through curl; status shows the same URL', async () => {
  const c = await runCli(['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', 'unix:'], { env: env(), timeoutMs: 60_000 });
  assert.equal(c.code, 0, c.stderr);
  const pid = Number(/\(pid (\d+)\)/.exec(c.stderr)?.[1]);
  try {
    const line = c.stdout.split('\n').find((l) => l.startsWith('export ALL_PROXY='));
    assert.ok(line, c.stdout);
    const pasted = await sh(`${line}\n${CURL_WHOAMI}`);
    assert.equal(pasted.code, 0, `${line}\n${pasted.stderr}`);
    assert.match(pasted.stdout, /"namespace":"shop"/);

    // Named: a SOCKS-only managed proxy serves exec only when asked for (see exec's help).
    const id = /connected (\S+) \(pid/.exec(c.stderr)![1]!;
    const exec = await runCli(['exec', '--kubeconfig', cluster.kubeconfig, '--id', id, '--', 'sh', '-c', `echo "ALL_PROXY=$ALL_PROXY"; ${CURL_WHOAMI}`], {
      env: env(),
      timeoutMs: 60_000,
    });
    assert.equal(exec.code, 0, exec.stderr);
    assert.match(exec.stderr, /using managed proxy/);
    assert.match(exec.stdout, /"namespace":"shop"/);
    const url = /^ALL_PROXY=socks5h:\/\/[^@]+@(localhost\/\S+)$/m.exec(exec.stdout)?.[1];
    assert.ok(url, exec.stdout);
    assert.equal(url, `localhost${path.join(socketDir, 'socks.sock')}`, 'the URL names the socket, plainly');

    const status = await runCli(['status'], { env: env() });
    assert.ok(status.stdout.includes(`socks5h://${url}`), status.stdout);
  } finally {
    await runCli(['disconnect', '--all'], { env: env() });
    await eventually(async () => !isAlive(pid), 10_000, 50).catch(() => undefined);
  }
});
