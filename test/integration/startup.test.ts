// Starting and stopping the foreground proxy: the clear one-line failures and the clean exit.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startTestCluster, unreachableKubeconfig, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess, repoRoot } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { SimPki } from '../sim/pki.js';
import { blackHole } from '../helpers/black-hole.js';

let cluster: TestCluster;

before(async () => {
  cluster = await startTestCluster();
});
after(async () => {
  await cluster?.close();
});

/** The start-up probe's own bound (its "timed out after 10000 ms"). */
const PROBE_BOUND_MS = 10_000;

/**
 * How long the CLI takes, here and now, to start and fail before touching the network (a
 * kubeconfig that is not there). Timed bounds below are the product's own timeouts on top of
 * this: on a loaded machine starting Node alone took seconds, which is not the product waiting.
 */
async function cliStartMs(): Promise<number> {
  const started = Date.now();
  const r = await runCli(['--kubeconfig', path.join(cluster.dir, 'absent-kubeconfig'), '--listen-socks', '127.0.0.1:0']);
  assert.match(r.stderr, /does not exist/);
  return Date.now() - started;
}

/** Exactly one line on stderr, starting with "Error:" or similar, no stack trace. */
function assertOneLineError(stderr: string, pattern: RegExp): void {
  const lines = stderr
    .trim()
    .split('\n')
    .filter((l) => !l.startsWith('{'));
  assert.equal(lines.length, 1, `expected one line, got:\n${stderr}`);
  assert.match(lines[0], pattern);
  assert.doesNotMatch(stderr, /\n\s+at /, 'no stack trace');
}

describe('fails fast with one clear line and a non-zero exit', () => {
  test('the port is taken', async () => {
    const blocker = net.createServer().listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', `127.0.0.1:${port}`]);
      assert.notEqual(r.code, 0);
      assertOneLineError(r.stderr, new RegExp(`127\\.0\\.0\\.1:${port}.*(in use|taken)`, 'i'));
    } finally {
      blocker.close();
    }
  });

  test('the kubeconfig does not exist', async () => {
    const r = await runCli(['--kubeconfig', path.join(cluster.dir, 'missing'), '--listen-socks', '127.0.0.1:0']);
    assert.notEqual(r.code, 0);
    assertOneLineError(r.stderr, /kubeconfig .*missing does not exist/);
  });

  test('the context does not exist', async () => {
    const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--context', 'nope', '--listen-socks', '127.0.0.1:0']);
    assert.notEqual(r.code, 0);
    assertOneLineError(r.stderr, /context "nope" not found/);
  });

  test('the kubeconfig has no current context: the contexts to pass are named', async () => {
    const file = path.join(cluster.dir, 'no-current');
    await writeFile(file, cluster.sim.kubeconfigYaml().replace(/^current-context:.*\n/m, ''), { mode: 0o600 });
    const r = await runCli(['--kubeconfig', file, '--listen-socks', '127.0.0.1:0']);
    assert.equal(r.code, 1);
    assertOneLineError(r.stderr, /^Error: the kubeconfig has no current context \(known: sim\): pass --context or run kubectl config use-context$/);
  });

  test('the API server is unreachable', async () => {
    const file = await unreachableKubeconfig(cluster);
    const start = await cliStartMs();
    const started = Date.now();
    const r = await runCli(['--kubeconfig', file, '--listen-socks', '127.0.0.1:0']);
    assert.notEqual(r.code, 0);
    assertOneLineError(r.stderr, /cannot reach the API server/);
    const ms = Date.now() - started;
    assert.ok(ms - start < PROBE_BOUND_MS, `fails at once, not after the probe's 10 s bound: ${ms} ms, ${start} ms to start and fail here`);
  });

  test("the kubeconfig's CA does not sign the server certificate: said so, with what to do, not as unreachable", async () => {
    const b64 = (pem: string) => Buffer.from(pem).toString('base64');
    const file = path.join(cluster.dir, 'other-ca');
    await writeFile(file, cluster.sim.kubeconfigYaml().replace(b64(cluster.sim.caPem), b64(new SimPki().caPem)), { mode: 0o600 });
    const r = await runCli(['--kubeconfig', file, '--listen-socks', '127.0.0.1:0']);
    assert.notEqual(r.code, 0);
    assertOneLineError(
      r.stderr,
      /^Error: the API server https:\/\/\S+ \(context "sim"\) is not trusted: its certificate is not signed by the CA the kubeconfig gives for cluster "[^"]+" .*: get a current kubeconfig .*trust its CA with --extra-ca FILE/,
    );
  });

  test('the API server drops connection attempts (a VPN down): the start and doctor fail within their bound, not the OS connect timeout', async () => {
    const hole = await blackHole();
    try {
      const file = path.join(cluster.dir, 'black-hole');
      await writeFile(file, cluster.sim.kubeconfigYaml({ server: `https://127.0.0.1:${hole.port}` }), { mode: 0o600 });
      const start = await cliStartMs();
      let started = Date.now();
      const r = await runCli(['--kubeconfig', file, '--listen-socks', '127.0.0.1:0']);
      assert.notEqual(r.code, 0);
      assertOneLineError(r.stderr, /cannot reach the API server .*timed out after 10000 ms/);
      // The OS gives up on a dropped connect after ~2 min: a wide margin still tells them apart.
      let ms = Date.now() - started;
      assert.ok(ms - start < PROBE_BOUND_MS + 15_000, `the 10 s probe bound, not ~2 min: ${ms} ms, ${start} ms to start and fail here`);
      // Against doctor refused at once: the black hole costs one --request-timeout (2 s), not
      // doctor's default 10 s.
      started = Date.now();
      const refused = await runCli(['doctor', '--kubeconfig', await unreachableKubeconfig(cluster), '--request-timeout', '2s']);
      assert.equal(refused.code, 1);
      const refusedMs = Date.now() - started;
      started = Date.now();
      const doctor = await runCli(['doctor', '--kubeconfig', file, '--request-timeout', '2s']);
      assert.equal(doctor.code, 1);
      assert.match(doctor.stdout, /timed out after 2000 ms/);
      ms = Date.now() - started;
      assert.ok(ms - refusedMs < 8_000, `doctor within its --request-timeout: ${ms} ms, ${refusedMs} ms when refused at once`);
    } finally {
      hole.close();
    }
  });

  test('a --cluster-domain that is no DNS domain', async () => {
    const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--cluster-domain', 'a..b', '--listen-socks', '127.0.0.1:0']);
    assert.equal(r.code, 2);
    assertOneLineError(r.stderr, /--cluster-domain: "a\.\.b" is not a DNS domain/);
  });

  test('the API server rejects the credentials', async () => {
    const file = path.join(cluster.dir, 'badtoken');
    await writeFile(file, cluster.sim.kubeconfigYaml({ token: 'not-a-valid-token' }), { mode: 0o600 });
    const r = await runCli(['--kubeconfig', file, '--listen-socks', '127.0.0.1:0']);
    assert.notEqual(r.code, 0);
    // Whose credentials, and what to do about them.
    assertOneLineError(r.stderr, /rejected the credentials of context "[^"]+" \(user "[^"]+"\) \(401 Unauthorized\): log in again or renew the token/);
  });
});

describe('running', () => {
  test('prints bound addresses and paste-ready lines; IPv6 listeners work', async () => {
    // --shutdown-grace 0 here and below: the simulated runtime keeps a finished stream ~1 s after
    // curl's FIN (as containerd does), and a drain on stop is the grace-period test's subject.
    const p = await startProxyProcess([
      '--kubeconfig',
      cluster.kubeconfig,
      '--listen-socks',
      '[::1]:0',
      '--listen-http',
      '127.0.0.1:0',
      '--shutdown-grace',
      '0',
    ]);
    try {
      assert.match(p.stdout.join('\n'), /SOCKS5 proxy on \[::1\]:\d+/);
      assert.ok(p.stdout.includes(`export HTTP_PROXY=http://${p.http}`));
      assert.ok(p.stdout.includes(`export HTTPS_PROXY=http://${p.http}`));
      const r = await curl(['--proxy', `socks5h://${p.socks}`, 'http://web.shop:8080/']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /hello from web-/);
    } finally {
      assert.equal(await p.stop('SIGINT'), 0, 'SIGINT exits 0');
    }
  });

  test('--listen-socks/--listen-http localhost: one port on 127.0.0.1 and ::1 both, whatever the resolver puts first', async () => {
    // This machine's resolver may give either address first (macOS and most distros give ::1);
    // a client may try either, so neither can be the only one listening.
    const p = await startProxyProcess([
      '--kubeconfig',
      cluster.kubeconfig,
      '--listen-socks',
      'localhost:0',
      '--listen-http',
      'localhost:0',
      '--shutdown-grace',
      '0',
    ]);
    try {
      assert.match(p.socks!, /^127\.0\.0\.1:\d+$/, 'the ready lines name 127.0.0.1, the same on every machine');
      const socksPort = p.socks!.split(':')[1]!;
      const httpPort = p.http!.split(':')[1]!;
      for (const host of ['127.0.0.1', '[::1]']) {
        for (const proxy of [`socks5h://${host}:${socksPort}`, `http://${host}:${httpPort}`]) {
          const r = await curl(['--proxy', proxy, 'http://web.shop:8080/']);
          assert.equal(r.code, 0, `${proxy}: ${r.stderr}`);
          assert.match(r.stdout, /hello from web-/);
        }
      }
    } finally {
      assert.equal(await p.stop('SIGINT'), 0);
    }
  });

  test('a SIGTERM sent the moment the ready lines appear is a clean stop (exit 0), not a death by signal', async () => {
    // Whoever reads the ready lines may signal at once; the handlers must be in place by then.
    // The window was short, so a few tries.
    for (let i = 0; i < 6; i++) {
      const p = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0']);
      const code = await p.stop('SIGTERM');
      assert.equal(code, 0, `try ${i + 1}: exit ${code} (signal ${p.proc.signalCode})`);
    }
  });

  test('--cluster-domain is taken as names are compared: "Cluster.Local." serves web.shop.svc.cluster.local', async () => {
    const p = await startProxyProcess([
      '--kubeconfig',
      cluster.kubeconfig,
      '--listen-socks',
      '127.0.0.1:0',
      '--cluster-domain',
      'Cluster.Local.',
      '--shutdown-grace',
      '0',
    ]);
    try {
      const r = await curl(['--proxy', `socks5h://${p.socks}`, 'http://web.shop.svc.cluster.local:8080/']);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /hello from web-/);
    } finally {
      await p.stop();
    }
  });

  test('closing the terminal it runs in stops it and frees its port (a hangup, not a reload)', async (t) => {
    if (!existsSync('/usr/bin/script')) return t.skip('script(1) is not installed: no pseudo-terminal to close');
    const port = await new Promise<number>((resolve) => {
      const probe = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (probe.address() as net.AddressInfo).port;
        probe.close(() => resolve(p));
      });
    });
    // script(1) runs the proxy on a pseudo-terminal; killing script closes that terminal. Its
    // stderr goes to a file, to see how it ended once the terminal is gone.
    const errDir = mkdtempSync(path.join(tmpdir(), 'proxyout-hangup-'));
    const errFile = path.join(errDir, 'stderr');
    const term = spawn(
      '/usr/bin/script',
      [
        '-qfec',
        `exec ${process.execPath} ${path.join(repoRoot, 'bin', 'kubectl-proxyout')} --kubeconfig ${cluster.kubeconfig} --listen-socks 127.0.0.1:${port} 2>${errFile}`,
        '/dev/null',
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    // Whatever fails below, the terminal goes (and the proxy with it): a test file left waiting on it never ends.
    t.after(() => term.kill('SIGKILL'));
    t.after(() => rmSync(errDir, { recursive: true, force: true }));
    let out = '';
    term.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    const deadline = Date.now() + 30_000;
    while (!out.includes('ALL_PROXY') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.ok(out.includes('ALL_PROXY'), `the proxy did not start on the terminal: ${out}`);
    const pid = execFileSync('pgrep', ['-f', `listen-socks 127.0.0.1:${port}`])
      .toString()
      .split('\n')
      .map(Number)
      // script(1)'s command line names the proxy too; the proxy's first argument is node itself
      // (its comm is "MainThread" from Node 24 on, so that cannot tell them apart).
      .find((p) => p > 0 && readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')[0] === process.execPath);
    assert.ok(pid, 'found the proxy process');
    try {
      term.kill('SIGKILL');
      const gone = Date.now() + 10_000;
      while (existsSync(`/proc/${pid}`) && Date.now() < gone) await new Promise((r) => setTimeout(r, 100));
      assert.equal(existsSync(`/proc/${pid}`), false, 'the proxy still runs after its terminal was closed');
      const s = net.connect(port, '127.0.0.1');
      const [err] = (await once(s, 'error')) as [NodeJS.ErrnoException];
      assert.equal(err.code, 'ECONNREFUSED', 'its port is free');
      // Drained and gone of the hangup: no write to the gone terminal (EIO) nor Node's abort.
      const stderr = readFileSync(errFile, 'utf8');
      assert.match(stderr, /"msg":"stopped"/);
      assert.doesNotMatch(stderr, /EIO|Assertion failed|Native stack trace/);
    } finally {
      try {
        process.kill(pid!, 'SIGKILL');
      } catch {
        // gone, as it should be
      }
    }
  });

  test('closing the terminal while it starts (an API server that does not answer) ends it of the hangup', async (t) => {
    if (!existsSync('/usr/bin/script')) return t.skip('script(1) is not installed: no pseudo-terminal to close');
    // Accepts and never answers: the start waits on it.
    const silent = net.createServer((socket) => socket.on('error', () => undefined)).listen(0, '127.0.0.1');
    await once(silent, 'listening');
    t.after(() => silent.close());
    const kubeconfig = path.join(cluster.dir, 'silent-kubeconfig');
    await writeFile(kubeconfig, cluster.sim.kubeconfigYaml({ server: `https://127.0.0.1:${(silent.address() as net.AddressInfo).port}` }), { mode: 0o600 });
    const errDir = mkdtempSync(path.join(tmpdir(), 'proxyout-hangup-start-'));
    t.after(() => rmSync(errDir, { recursive: true, force: true }));
    const errFile = path.join(errDir, 'stderr');
    const marker = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    const term = spawn(
      '/usr/bin/script',
      [
        '-qfec',
        `exec ${process.execPath} ${path.join(repoRoot, 'bin', 'kubectl-proxyout')} --kubeconfig ${kubeconfig} --listen-socks 127.0.0.1:0 2>${errFile}`,
        '/dev/null',
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    t.after(() => term.kill('SIGKILL'));
    // The proxy is connected to the silent server: its start is under way, its handlers installed.
    let held = 0;
    const connected = new Promise<void>((resolve) => silent.on('connection', () => ++held === 1 && resolve()));
    await Promise.race([connected, new Promise((r) => setTimeout(r, 30_000))]);
    assert.ok(held > 0, `the proxy did not start on the terminal (${marker})`);
    const pid = execFileSync('pgrep', ['-f', '--', `--kubeconfig ${kubeconfig}`])
      .toString()
      .split('\n')
      .map(Number)
      .find((p) => p > 0 && readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')[0] === process.execPath);
    assert.ok(pid, 'found the proxy process');
    term.kill('SIGKILL');
    const gone = Date.now() + 10_000;
    while (existsSync(`/proc/${pid}`) && Date.now() < gone) await new Promise((r) => setTimeout(r, 100));
    assert.equal(existsSync(`/proc/${pid}`), false, 'the proxy still runs after its terminal was closed');
    assert.doesNotMatch(readFileSync(errFile, 'utf8'), /EIO|Assertion failed|Native stack trace/);
  });

  test('outliving its closed terminal (setsid, as a disowned job), a later SIGTERM is still a clean stop', async (t) => {
    if (!existsSync('/usr/bin/script')) return t.skip('script(1) is not installed: no pseudo-terminal to close');
    const errDir = mkdtempSync(path.join(tmpdir(), 'proxyout-outlived-'));
    t.after(() => rmSync(errDir, { recursive: true, force: true }));
    const errFile = path.join(errDir, 'stderr');
    // Its stdin and stdout are the terminal's, but no hangup reaches it: it runs on after the close.
    const term = spawn(
      '/usr/bin/script',
      [
        '-qfec',
        `exec setsid -w ${process.execPath} ${path.join(repoRoot, 'bin', 'kubectl-proxyout')} --kubeconfig ${cluster.kubeconfig} --listen-socks 127.0.0.1:0 --log-format json 2>${errFile}`,
        '/dev/null',
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    t.after(() => term.kill('SIGKILL'));
    let out = '';
    term.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    const deadline = Date.now() + 30_000;
    while (!out.includes('ALL_PROXY') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const pid = Number(/"pid":(\d+),[^\n]*"msg":"proxy ready"/.exec(readFileSync(errFile, 'utf8'))?.[1]);
    assert.ok(pid > 0, `the proxy did not start on the terminal: ${out}`);
    t.after(() => {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone, as it should be
      }
    });
    term.kill('SIGKILL');
    await once(term, 'exit');
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(existsSync(`/proc/${pid}`), 'it runs on without its terminal');
    process.kill(pid, 'SIGTERM');
    const gone = Date.now() + 10_000;
    while (existsSync(`/proc/${pid}`) && Date.now() < gone) await new Promise((r) => setTimeout(r, 100));
    assert.equal(existsSync(`/proc/${pid}`), false, 'it stopped');
    const stderr = readFileSync(errFile, 'utf8');
    assert.match(stderr, /"msg":"stopped"/);
    assert.doesNotMatch(stderr, /EIO|Assertion failed|Native stack trace/);
  });

  test('under setsid, writing to a terminal it has no control of, SIGHUP reloads instead of stopping it', async (t) => {
    if (!existsSync('/usr/bin/script')) return t.skip('script(1) is not installed: no pseudo-terminal');
    // Its stdin and stderr are the terminal's, but setsid left it no controlling terminal: no
    // hangup can come from one, so a SIGHUP is someone's `kill -HUP`.
    const term = spawn(
      '/usr/bin/script',
      [
        '-qfec',
        `exec setsid -w ${process.execPath} ${path.join(repoRoot, 'bin', 'kubectl-proxyout')} --kubeconfig ${cluster.kubeconfig} --listen-socks 127.0.0.1:0 --log-format json`,
        '/dev/null',
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    t.after(() => term.kill('SIGKILL'));
    let out = '';
    term.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    const deadline = Date.now() + 30_000;
    while (!out.includes('ALL_PROXY') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const pid = Number(/"msg":"proxy ready"/.test(out) && /"pid":(\d+),[^\n]*"msg":"proxy ready"/.exec(out)?.[1]);
    assert.ok(pid > 0, `the proxy did not start on the terminal: ${out}`);
    try {
      process.kill(pid, 'SIGHUP');
      const until = Date.now() + 10_000;
      while (!out.includes('routing table reloaded') && !out.includes('shutting down') && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
      assert.match(out, /SIGHUP: reloading the routing table/);
      assert.doesNotMatch(out, /shutting down/);
      assert.ok(existsSync(`/proc/${pid}`), 'it still runs');
    } finally {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  });

  test('SIGTERM lets an open stream finish within the grace period, then exits 0', async () => {
    const p = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--shutdown-grace', '3s']);
    const slow = curl([
      '--proxy',
      `socks5h://${p.socks}`,
      '--limit-rate',
      '200k',
      '-o',
      '/dev/null',
      '-w',
      '%{size_download}',
      'http://web.shop:8080/bytes/300000',
    ]);
    await new Promise((r) => setTimeout(r, 400));
    const code = await p.stop('SIGTERM');
    const r = await slow;
    assert.equal(code, 0);
    assert.equal(r.code, 0, `the in-flight download completed: ${r.stderr}`);
    assert.equal(r.stdout, '300000');
    assert.ok(p.logs.some((l) => l.msg === 'stopped'));
  });

  test('`kubectl proxyout` runs the proxy through kubectl plugin discovery', async (t) => {
    let kubectl = '';
    try {
      kubectl = execFileSync('sh', ['-c', 'command -v kubectl'], { encoding: 'utf8' }).trim();
    } catch {
      /* absent */
    }
    if (!kubectl) {
      t.skip('kubectl not on PATH: plugin discovery check skipped');
      return;
    }
    const p = await startProxyProcess(['proxyout', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--shutdown-grace', '0'], {
      command: [kubectl],
      env: { PATH: `${path.join(repoRoot, 'bin')}:${path.dirname(process.execPath)}:${process.env.PATH}` },
    });
    try {
      const r = await curl(['--proxy', `socks5h://${p.socks}`, 'http://web.shop:8080/']);
      assert.match(r.stdout, /hello from web-/);
    } finally {
      await p.stop();
    }
  });
});
