// `exec` and managed port mappings, end to end with the real CLI: a temporary proxy that lives as
// long as CMD, a running managed proxy found by its derived ID, the variables CMD gets, its exit
// status and signals, and mappings in `connect`/`status`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os, { tmpdir } from 'node:os';
import dns from 'node:dns/promises';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { binPath, runCli } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { isAlive } from '../../src/state/process.js';
import { statusItem, statusItems } from '../helpers/status-json.js';
import { proxyEntry } from '../helpers/proxy-entry.js';
import { ensureStateDir, layout } from '../../src/state/paths.js';
import { writeEntry } from '../../src/managed/store.js';

let cluster: TestCluster;
let stateDir: string;
const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: stateDir });
const cli = (args: string[]) => runCli(args, { env: env(), timeoutMs: 60_000 });
/** Prints the proxy variables CMD got, one per line, then fetches a Service with them (curl reads ALL_PROXY). */
const SHOW_ENV_AND_CURL =
  'for v in ALL_PROXY all_proxy HTTP_PROXY http_proxy HTTPS_PROXY https_proxy NO_PROXY no_proxy; do eval "echo $v=\\${$v:-}"; done; curl -s --max-time 20 http://web.shop:8080/whoami';

const findKubectl = () => spawnSync('sh', ['-c', 'command -v kubectl'], { encoding: 'utf8' }).stdout.trim() || undefined;

function parseEnv(stdout: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of stdout.split('\n')) {
    const m = /^([A-Za-z_]+)=(.*)$/.exec(line);
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

before(async () => {
  cluster = await startTestCluster();
  stateDir = mkdtempSync(path.join(tmpdir(), 'pxe-'));
});

after(async () => {
  await cli(['quit']).catch(() => undefined);
  await cluster?.close();
  rmSync(stateDir, { recursive: true, force: true });
});

describe('exec without a managed proxy: a temporary one', () => {
  test('no cluster it is for could start (a namespace the user may not read): CMD does not run, the error is said, as the foreground proxy says it', async () => {
    const token = cluster.sim.issueToken({ namespaces: ['shop'] });
    const kubeconfig = path.join(cluster.dir, 'kc-shop-only');
    await cluster.sim.writeKubeconfig(kubeconfig, { namespace: 'shop', token });
    const marker = path.join(cluster.dir, 'cmd-ran');
    const r = await cli(['exec', '--kubeconfig', kubeconfig, '-n', 'secret', '--', 'sh', '-c', `touch ${marker}`]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /^Error: context "sim" may not watch Services and EndpointSlices cluster-wide nor in namespace "secret"/m);
    assert.ok(!existsSync(marker), 'CMD did not run');
    // The doctor line it suggests checks that namespace, and finds what is missing (not the context's own, which is fine).
    const suggested = /\(`kubectl proxyout (doctor [^`]+)` lists what is missing\)/.exec(r.stderr)?.[1];
    assert.equal(suggested, 'doctor --context sim -n secret', r.stderr);
    const doctor = await cli([...suggested.split(' '), '--kubeconfig', kubeconfig]);
    assert.equal(doctor.code, 1, doctor.stdout);
    assert.match(doctor.stdout, /FAIL rbac: not allowed in namespace secret nor cluster-wide/);
    assert.doesNotMatch(r.stderr, /the others serve/, "exec's own direct route serves nothing: no warning that others do");
    const foreground = await cli(['--kubeconfig', kubeconfig, '-n', 'secret', '--listen-socks', '127.0.0.1:0']);
    assert.equal(foreground.code, 1);
    assert.equal(
      foreground.stderr.split('\n').find((l) => l.startsWith('Error: ')),
      r.stderr.split('\n').find((l) => l.startsWith('Error: ')),
    );
  });

  test('hosts outside the cluster are passed through, as CMD would dial them itself; --no-direct refuses them', async () => {
    // 127.0.0.2 is not in NO_PROXY: CMD's curl asks the proxy, whose direct route the config lets dial it.
    const server = net.createServer((s) => s.end('HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\noutside'));
    server.listen(0, '127.0.0.2');
    await once(server, 'listening');
    const url = `http://127.0.0.2:${(server.address() as net.AddressInfo).port}/`;
    const config = path.join(cluster.dir, 'exec-direct.yaml');
    writeFileSync(config, `routes:\n  - name: direct\n    kind: direct\n    allow: [127.0.0.0/8]\n`);
    const fetch = `curl -s -w ' %{http_code}' --max-time 20 ${url}`;
    try {
      const passed = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--context', 'sim', '--config', config, '--', 'sh', '-c', fetch]);
      assert.equal(passed.code, 0, passed.stderr);
      assert.equal(passed.stdout, 'outside 200');
      const refused = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--context', 'sim', '--config', config, '--no-direct', '--', 'sh', '-c', fetch]);
      assert.match(refused.stdout, / 403$/);
      assert.doesNotMatch(refused.stdout, /outside/);
    } finally {
      server.close();
    }
  });

  test('CMD gets every variable (with a generated password) and reaches the cluster; the proxy is gone after', async () => {
    const r = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', SHOW_ENV_AND_CURL]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stderr,
      /^kubectl-proxyout: no managed proxy for context sim; started a temporary one for this command \(context sim, namespace shop; socks 127\.0\.0\.1:\d+, http 127\.0\.0\.1:\d+; log: kubectl proxyout logs exec\)$/m,
    );
    // The terminal is CMD's: at the default --log-level (info, as every proxy's) the temporary
    // proxy's lines go to `logs exec`; only warnings and errors would reach stderr.
    assert.deepEqual(
      r.stderr.split('\n').filter((l) => l.startsWith('{')),
      [],
      'no log lines on stderr',
    );
    const logged = (await cli(['logs', 'exec', '--json'])).stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { level: number; msg: string; via?: string });
    assert.ok(
      logged.some((l) => l.msg === 'proxy ready' && l.level === 30),
      'the info lines are in logs exec',
    );
    assert.ok(
      logged.some((l) => l.msg === 'stream open' && /^shop\/web-/.test(l.via ?? '')),
      'with the stream and its pod',
    );
    const vars = parseEnv(r.stdout);
    assert.match(vars.ALL_PROXY!, /^socks5h:\/\/proxyout:[A-Za-z0-9_-]{32}@127\.0\.0\.1:\d+$/);
    assert.equal(vars.all_proxy, vars.ALL_PROXY);
    assert.match(vars.HTTP_PROXY!, /^http:\/\/proxyout:[A-Za-z0-9_-]{32}@127\.0\.0\.1:\d+$/);
    for (const k of ['http_proxy', 'HTTPS_PROXY', 'https_proxy']) assert.equal(vars[k], vars.HTTP_PROXY, k);
    assert.equal(vars.NO_PROXY, 'localhost,127.0.0.1,::1,[::1]');
    assert.equal(vars.no_proxy, vars.NO_PROXY);
    assert.match(r.stdout, /"namespace":"shop"/, 'curl reached web.shop through the proxy');
    // The temporary proxy lived exactly as long as CMD: its port is closed now.
    const port = Number(/:(\d+)$/.exec(vars.ALL_PROXY!)![1]);
    const after = await curl(['--proxy', `socks5h://127.0.0.1:${port}`, 'http://web.shop:8080/']);
    assert.equal(after.code, 7, 'connection refused once exec returned');
  });

  test(
    'a state directory on a read-only file system (a CI job, a container) keeps no log, and CMD still runs',
    { skip: process.getuid?.() !== 0 && 'needs root (a read-only bind mount)' },
    async () => {
      const home = mkdtempSync(path.join(tmpdir(), 'pxe-ro-'));
      try {
        // The CLI runs in a mount namespace of its own, where `home` is read-only.
        const readOnly = ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', 'mount --bind -o ro "$0" "$0" && exec "$@"', home];
        const r = await runCli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', 'curl -s --max-time 20 http://web.shop:8080/whoami'], {
          env: { KUBECTL_PROXYOUT_STATE_DIR: path.join(home, 'state') },
          timeoutMs: 60_000,
          via: readOnly,
        });
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stdout, /"namespace":"shop"/, 'curl reached web.shop through the proxy');
        assert.match(r.stderr, /^kubectl-proxyout: exec's log is not kept: cannot create the state directory .*\/state: EROFS: read-only file system/m);
        assert.match(r.stderr, /started a temporary one for this command \(.*; log: warnings on stderr only\)$/m);
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    },
  );

  test("CMD's exit status is exec's; 128+N when CMD died of signal N; 127 when CMD does not exist", async () => {
    assert.equal((await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', 'exit 7'])).code, 7);
    // Died of CMD's signal, as CMD would have (a shell's loop stops on Ctrl-C); a shell reads 128+N.
    for (const signal of ['TERM', 'INT'] as const) {
      const killed = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', `kill -${signal} $$`]);
      assert.deepEqual([killed.code, killed.signal], [null, `SIG${signal}`], killed.stderr);
    }
    const status = await runCli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', 'kill -TERM $$'], {
      env: env(),
      via: ['sh', '-c', '"$@"; echo status=$?', 'sh'],
    });
    assert.match(status.stdout, /^status=143$/m, status.stderr);
    // A core-dumping signal is not raised again (a node core file): 128+N.
    assert.equal((await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', 'kill -QUIT $$'])).code, 131);
    const missing = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'no-such-command-here']);
    assert.equal(missing.code, 127);
    // As a shell says it, and before any proxy starts: none was started and stopped for a typo.
    assert.equal(missing.stderr, 'kubectl-proxyout: no-such-command-here: command not found\n');
    const notThere = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--', './no-such-script.sh']);
    assert.deepEqual([notThere.code, notThere.stderr], [127, 'kubectl-proxyout: ./no-such-script.sh: No such file or directory\n']);
    const plain = path.join(cluster.dir, 'not-executable.sh');
    writeFileSync(plain, 'exit 0\n', { mode: 0o644 });
    const notExecutable = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--', plain]);
    assert.deepEqual([notExecutable.code, notExecutable.stderr], [126, `kubectl-proxyout: ${plain}: Permission denied\n`]);
    // An empty PATH entry is the working directory, as execvp reads it: a script there runs.
    writeFileSync(path.join(cluster.dir, 'here.sh'), '#!/bin/sh\necho ran\n', { mode: 0o755 });
    const fromCwd = await runCli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'here.sh'], {
      env: { ...env(), PATH: `:${process.env.PATH ?? ''}` },
      cwd: cluster.dir,
    });
    assert.deepEqual([fromCwd.code, fromCwd.stdout], [0, 'ran\n'], fromCwd.stderr);
    const reserved = await cli(['connect', '--socks', '--id', 'exec', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0']);
    assert.notEqual(reserved.code, 0);
    assert.match(reserved.stderr, /connection ID "exec" is taken by the log of exec's temporary proxies/);
    const none = await cli(['exec', '--kubeconfig', cluster.kubeconfig]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /no command to run/);
    // CMD's own `--` and flag-like words reach it as given (kubectl exec pod -- ls, npm test -- --grep).
    const args = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', 'printf "%s," "$@"', 'x', 'a', '--', '--id', '--', 'b']);
    assert.equal(args.code, 0, args.stderr);
    assert.equal(args.stdout, 'a,--,--id,--,b,');
    // Without `--`, CMD starts at its first word: its flags are its own, not exec's (-n, --id,
    // --help were taken by exec: `exec kubectl get pods -n shop` listed another namespace).
    const bare = await cli([
      'exec',
      '--kubeconfig',
      cluster.kubeconfig,
      '-n',
      'shop',
      'sh',
      '-c',
      'printf "%s," "$@"',
      'x',
      '-n',
      'other',
      '--id',
      'y',
      '--help',
    ]);
    assert.equal(bare.code, 0, bare.stderr);
    assert.equal(bare.stdout, '-n,other,--id,y,--help,');
    assert.match(bare.stderr, /\(context sim, namespace shop;/);
    // --id names the proxy wanted: when it does not run, the line says so, not "for context sim".
    const byId = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--id', 'no-such-id', '--', 'true']);
    assert.equal(byId.code, 0, byId.stderr);
    assert.match(byId.stderr, /^kubectl-proxyout: no managed proxy no-such-id is running; started a temporary one for this command \(context sim,/m);
    // One that `status` lists but that does not run is named as it is, not as missing.
    const l = layout(stateDir);
    ensureStateDir(l);
    writeEntry(l, proxyEntry('gone-one', { phase: 'running', pid: 2 ** 22 + 1 }));
    const dead = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--id', 'gone-one', '--', 'true']);
    assert.equal(dead.code, 0, dead.stderr);
    assert.match(
      dead.stderr,
      /^kubectl-proxyout: managed proxy gone-one is dead \(clean up with: kubectl proxyout disconnect gone-one\); started a temporary one for this command/m,
    );
    assert.equal((await cli(['disconnect', 'gone-one'])).code, 0);
  });

  test("the temporary proxy does not bind the config file's port mappings (one may be taken by a running proxy)", async () => {
    const taken = net.createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const port = (taken.address() as net.AddressInfo).port;
    const config = path.join(cluster.dir, 'exec-forwards.yaml');
    writeFileSync(config, `forward: ["${port}=web.shop:8080"]\nroutes:\n  - { name: sim, kind: cluster, context: sim }\n`);
    try {
      const r = await cli([
        'exec',
        '--kubeconfig',
        cluster.kubeconfig,
        '--config',
        config,
        '--',
        'sh',
        '-c',
        'curl -s --max-time 20 http://web.shop:8080/whoami',
      ]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /"namespace":"shop"/);
    } finally {
      taken.close();
    }
  });

  test("kubectl in CMD reaches its API server directly: NO_PROXY names the routes' API servers and keeps the caller's entries", async (t) => {
    // HTTPS_PROXY names our HTTP listener, and kubectl (client-go) reads it: without its API server
    // in NO_PROXY, kubectl asked our proxy for it and was refused (403). Go never proxies loopback
    // IPs or "localhost", so the API server is named by this machine's host name (loopback here).
    const host = os.hostname().toLowerCase();
    const resolved = await dns.lookup(host).catch(() => undefined);
    if (!resolved || !/^127\./.test(resolved.address))
      return t.skip(`the host name ${host} does not resolve to a loopback address here: nothing to name the API server by`);
    if (!findKubectl()) return t.skip('kubectl is not on PATH');
    const kubeconfig = path.join(cluster.dir, 'by-host-name.kubeconfig');
    await cluster.sim.writeKubeconfig(kubeconfig, {
      server: cluster.sim.server.replace('127.0.0.1', host),
      insecureSkipTlsVerify: true,
      context: 'by-name',
      namespace: 'shop',
    });
    const script = 'echo "NO_PROXY=$NO_PROXY"; kubectl get services -o name';
    const r = await runCli(['exec', '--kubeconfig', kubeconfig, '--', 'sh', '-c', script], {
      env: { ...env(), KUBECONFIG: kubeconfig, NO_PROXY: '.corp.example', no_proxy: '' },
      timeoutMs: 60_000,
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(parseEnv(r.stdout).NO_PROXY, `localhost,127.0.0.1,::1,[::1],${host},.corp.example`);
    assert.match(r.stdout, /^service\/web$/m, 'kubectl listed the Services');
  });

  test('a local service on [::1] is reached directly by curl and by Python in CMD, not through the proxy', async (t) => {
    if (spawnSync('python3', ['-c', '']).status !== 0) return t.skip('python3 is not installed');
    const local = net.createServer((s) => s.end('HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nlocal'));
    local.listen(0, '::1');
    await once(local, 'listening');
    t.after(() => local.close());
    const url = `http://[::1]:${(local.address() as net.AddressInfo).port}/`;
    // urllib reads http_proxy and no_proxy as they are: the proxy refuses ::1 (403) if it is sent there.
    const python = `import urllib.request as u; print("python", u.urlopen("${url}").read().decode())`;
    const r = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', `curl -s --max-time 10 -w '\\n' ${url}; python3 -c '${python}'`]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^local$/m, 'curl');
    assert.match(r.stdout, /^python local$/m, 'python');
  });

  test("a client that asks without credentials first (git, curl --proxy-anyauth) gets its 407 challenge with no warning on CMD's stderr", async () => {
    const r = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'curl', '-s', '--max-time', '20', '--proxy-anyauth', 'http://web.shop:8080/whoami']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /"namespace":"shop"/, 'curl answered the challenge with the credentials of http_proxy');
    assert.doesNotMatch(r.stderr, /stream failed|auth-failed/, 'the challenge is no warning');
    // A wrong password still is.
    const wrong = await cli([
      'exec',
      '--kubeconfig',
      cluster.kubeconfig,
      '--',
      'sh',
      '-c',
      'curl -s --max-time 20 -x "$(echo "$http_proxy" | sed "s/:[^:@]*@/:wrong@/")" http://web.shop:8080/whoami',
    ]);
    assert.match(wrong.stderr, /wrong proxy user name or password/);
  });

  test('SIGTERM, SIGINT, SIGQUIT and SIGHUP sent to exec reach CMD (no terminal: as under a service manager)', async () => {
    for (const [signal, code] of [
      ['SIGTERM', 42],
      ['SIGINT', 43],
      ['SIGHUP', 44],
      ['SIGQUIT', 45],
    ] as const) {
      const script = `trap 'exit ${code}' ${signal.slice(3)}; echo ready; while :; do sleep 0.05; done`;
      // detached: a session of its own, without the terminal this test may run in (on one, a
      // SIGINT to the foreground job is the terminal's, which CMD gets by itself: exec-terminal.test.ts).
      const proc = spawn(process.execPath, [binPath, 'exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', script], {
        env: { ...process.env, ...env() },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      let out = '';
      proc.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
      await eventually(async () => out.includes('ready'), 30_000, 50);
      proc.kill(signal);
      const [exit] = (await once(proc, 'exit')) as [number | null];
      assert.equal(exit, code, `${signal}: CMD's trap decides the status`);
    }
  });
});

describe('a managed proxy with mappings, and exec using it', () => {
  let id: string;
  let pid: number;
  before(async () => {
    const r = await cli([
      'connect',
      '--kubeconfig',
      cluster.kubeconfig,
      '--listen-socks',
      '127.0.0.1:0',
      '--listen-http',
      '127.0.0.1:0',
      '--forward',
      '0=web.shop:8080',
      '--json',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as { id: string; pid: number; forwards: Array<{ listen: string; port: number; target: string }> };
    id = out.id;
    pid = out.pid;
    assert.equal(out.forwards.length, 1);
    assert.equal(out.forwards[0]!.target, 'web.shop:8080');
    assert.ok(out.forwards[0]!.port > 0, 'LPORT 0 is reported as the bound port');
  });
  after(async () => {
    await cli(['disconnect', id]);
    await eventually(async () => !isAlive(pid), 10_000, 50).catch(() => undefined);
  });

  test('status (and --json) report each mapping with its bound port; curl works through it', async () => {
    const s = await cli(['status', id, '--json']);
    assert.equal(s.code, 0, s.stderr);
    const row = statusItem<{ forwards: Array<{ listen: string; port: number; target: string }> }>(s.stdout);
    assert.equal(row.forwards.length, 1);
    const { port, listen, target } = row.forwards[0]!;
    assert.equal(listen, `127.0.0.1:${port}`);
    assert.equal(target, 'web.shop:8080');
    const table = await cli(['status']);
    assert.ok(table.stdout.split('\n').includes(`${id}: port 127.0.0.1:${port} → web.shop:8080`), table.stdout);
    const r = await curl([`http://127.0.0.1:${port}/whoami`]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /"namespace":"shop"/);
  });

  test('connect again asking for other mappings is an error naming --forward; the same ones report the running proxy', async () => {
    const other = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--forward', '0=api.shop:80']);
    assert.equal(other.code, 1);
    assert.match(other.stderr, /--forward \(running: 0=web\.shop:8080, asked: 0=api\.shop:80\)/);
    const same = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--forward', '0=web.shop:8080']);
    assert.equal(same.code, 0, same.stderr);
    assert.match(same.stderr, /already running/);
    assert.match(same.stderr, /port 127\.0\.0\.1:\d+ → web\.shop:8080 \(curl http:\/\/127\.0\.0\.1:\d+\/\)/);
  });

  test('exec uses the running managed proxy (its generated password in the URLs) and says so', async () => {
    const s = statusItem<{ socks: string; http: string }>((await cli(['status', id, '--json'])).stdout);
    const r = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', SHOW_ENV_AND_CURL]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        `^kubectl-proxyout: using managed proxy ${id} \\(context sim, namespace shop; socks ${s.socks.replace(/\./g, '\\.')}, http ${s.http.replace(/\./g, '\\.')}\\)$`,
        'm',
      ),
    );
    const vars = parseEnv(r.stdout);
    assert.match(vars.ALL_PROXY!, new RegExp(`^socks5h://proxyout:[A-Za-z0-9_-]{32}@${s.socks.replace(/\./g, '\\.')}$`));
    assert.match(vars.https_proxy!, new RegExp(`^http://proxyout:[A-Za-z0-9_-]{32}@${s.http.replace(/\./g, '\\.')}$`));
    assert.equal(vars.NO_PROXY, 'localhost,127.0.0.1,::1,[::1]');
    assert.match(r.stdout, /"namespace":"shop"/);
    // It really went through the daemon: its stream count grew.
    const totals = statusItem<{ totalStreams: number }>((await cli(['status', id, '--json'])).stdout);
    assert.ok(totals.totalStreams >= 2);
  });

  test("exec with another kubeconfig identity for the same context does not hand CMD the managed proxy's rights", async () => {
    // The same context, server and namespace as another user (an exec plugin here): connect refuses it under this ID.
    const otherIdentity = path.join(cluster.dir, 'kc-other-identity');
    await cluster.sim.writeKubeconfig(otherIdentity, { namespace: 'shop', auth: 'exec' });
    const r = await cli(['exec', '--kubeconfig', otherIdentity, '--', 'sh', '-c', SHOW_ENV_AND_CURL]);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /using managed proxy/);
    assert.match(
      r.stderr,
      new RegExp(
        `^kubectl-proxyout: managed proxy ${id} serves context sim, namespace shop with other credentials \\(kubeconfig user "[^"]+" from [^)]+\\); started a temporary one`,
        'm',
      ),
    );
    assert.match(r.stdout, /"namespace":"shop"/);
  });
});

test("connect with the config file's mappings only (--listen-socks off): the daemon serves them; a fixed port already taken is refused before the daemon starts", async () => {
  const config = path.join(cluster.dir, 'connect-forwards.yaml');
  writeFileSync(config, `forward: ["0=web.shop:8080"]\nroutes:\n  - { name: sim, kind: cluster, context: sim }\n`);
  // --shutdown-grace 0: disconnect does not wait ~1 s for curl's stream (the simulated runtime's close grace).
  const r = await cli([
    'connect',
    '--kubeconfig',
    cluster.kubeconfig,
    '--config',
    config,
    '--listen-socks',
    'off',
    '--id',
    'cfgmaps',
    '--shutdown-grace',
    '0',
    '--json',
  ]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { pid: number; forwards: Array<{ port: number; target: string }> };
  try {
    assert.equal(out.forwards.length, 1);
    const got = await curl([`http://127.0.0.1:${out.forwards[0]!.port}/whoami`]);
    assert.equal(got.code, 0, got.stderr);
    assert.match(got.stdout, /"namespace":"shop"/);
    // No variable can name a mapping: exec runs CMD through a temporary proxy instead.
    const ran = await cli(['exec', '--kubeconfig', cluster.kubeconfig, '--config', config, '--id', 'cfgmaps', '--', 'sh', '-c', SHOW_ENV_AND_CURL]);
    assert.equal(ran.code, 0, ran.stderr);
    assert.match(ran.stderr, /^kubectl-proxyout: managed proxy cfgmaps has no SOCKS listener or HTTP one on TCP; started a temporary one for this command \(/m);
    assert.match(parseEnv(ran.stdout).ALL_PROXY!, /^socks5h:\/\/proxyout:[A-Za-z0-9_-]{32}@127\.0\.0\.1:\d+$/);
    assert.match(ran.stdout, /"namespace":"shop"/);
  } finally {
    await cli(['disconnect', 'cfgmaps']);
    await eventually(async () => !isAlive(out.pid), 10_000, 50).catch(() => undefined);
  }
  const taken = net.createServer().listen(0, '127.0.0.1');
  await once(taken, 'listening');
  const port = (taken.address() as net.AddressInfo).port;
  try {
    writeFileSync(config, `forward: ["${port}=web.shop:8080"]\nroutes:\n  - { name: sim, kind: cluster, context: sim }\n`);
    const refused = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--config', config, '--listen-socks', 'off', '--id', 'cfgmaps']);
    assert.equal(refused.code, 1, refused.stdout);
    assert.match(
      refused.stderr,
      // Named by the file it came from: there is no --forward flag to look for.
      new RegExp(
        `^Error: ${config.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: forward\\[0\\] ${port}=web\\.shop:8080: the address is already in use by another program; pick another local port`,
      ),
    );
    assert.deepEqual(statusItems((await cli(['status', '--json'])).stdout), [], 'no daemon was started');
  } finally {
    taken.close();
  }
});

test('a managed proxy on a unix socket in the state directory: status shows curl’s form; exec hands it (with the password) to CMD when named, else starts one with HTTP', async () => {
  const r = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--namespace', 'default', '--listen-socks', 'unix:m.sock', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { id: string; pid: number; socks: string; env: Record<string, string> };
  const socket = path.join(stateDir, 'm.sock');
  try {
    assert.equal(out.socks, `unix:${socket}`);
    assert.match(out.env.ALL_PROXY!, new RegExp(`^socks5h://proxyout:[A-Za-z0-9_-]{32}@localhost${socket.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`));
    const table = await cli(['status']);
    assert.ok(table.stdout.includes(`socks5h://localhost${socket}`), table.stdout);
    // The caller's own HTTP proxy (a corporate one, here nothing listening): curl prefers
    // http_proxy to ALL_PROXY, so exec must not leave it to CMD.
    const stale = 'http://127.0.0.1:9';
    const ran = await runCli(
      [
        'exec',
        '--kubeconfig',
        cluster.kubeconfig,
        '--namespace',
        'default',
        '--',
        'sh',
        '-c',
        'echo ALL_PROXY=$ALL_PROXY; for v in HTTP_PROXY http_proxy HTTPS_PROXY https_proxy; do eval "echo $v=\\${$v:-unset}"; done; curl -s --max-time 20 http://hello.default/',
      ],
      { env: { ...env(), HTTP_PROXY: stale, http_proxy: stale, HTTPS_PROXY: stale, https_proxy: stale }, timeoutMs: 60_000 },
    );
    assert.equal(ran.code, 0, ran.stderr);
    // Not named: no HTTP listener, which Go, Python and Node clients need, so a temporary proxy serves CMD.
    assert.match(ran.stderr, new RegExp(`managed proxy ${out.id} has no HTTP listener, which Go, Python and Node clients need .*; started a temporary one`));
    const named = await runCli(
      [
        'exec',
        '--kubeconfig',
        cluster.kubeconfig,
        '--namespace',
        'default',
        '--id',
        out.id,
        '--',
        'sh',
        '-c',
        'echo ALL_PROXY=$ALL_PROXY; for v in HTTP_PROXY http_proxy HTTPS_PROXY https_proxy; do eval "echo $v=\\${$v:-unset}"; done; curl -s --max-time 20 http://hello.default/',
      ],
      { env: { ...env(), HTTP_PROXY: stale, http_proxy: stale, HTTPS_PROXY: stale, https_proxy: stale }, timeoutMs: 60_000 },
    );
    assert.equal(named.code, 0, named.stderr);
    assert.match(named.stderr, new RegExp(`using managed proxy ${out.id} .*socks unix:`));
    assert.match(named.stderr, /has no HTTP listener: Go, Python and Node clients in CMD cannot use it/);
    const vars = parseEnv(named.stdout);
    assert.equal(vars.ALL_PROXY, out.env.ALL_PROXY);
    for (const v of ['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy'])
      assert.equal(vars[v], 'unset', `no HTTP listener: no ${v}, not even the caller's`);
    assert.match(named.stdout, /hello from hello-/);
    assert.match(ran.stdout, /hello from hello-/);
  } finally {
    // The file's last test: curl's stream ends now, not after the runtime's ~1 s close grace that
    // the daemon's drain on disconnect would wait out (exec's flags must match the proxy's, so
    // this one keeps its default --shutdown-grace).
    cluster.sim.endLingeringStreams();
    await cli(['disconnect', out.id]);
    await eventually(async () => !isAlive(out.pid), 10_000, 50).catch(() => undefined);
  }
});
