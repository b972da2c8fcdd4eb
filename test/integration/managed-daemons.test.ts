// Managed background proxies, end to end (continued from managed.test.ts, split off so that
// neither file nears the runner's per-file timeout on a loaded machine): daemons whose cache
// syncs, crashes and failures, and the daemon's own behaviour, through the real CLI against the
// simulated cluster, with a temporary state directory.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually, unreachableKubeconfig } from '../helpers/cluster.js';
import { runCli } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { cluster, stateDir, daemons, type Connected, cli, env, mode, proxyDir, connect, status, gone, useManagedBed } from '../helpers/managed-bed.js';

useManagedBed();

describe('a daemon whose cache is still syncing', () => {
  test('status answers while it starts and shows per kind what is listed so far', async () => {
    // Watch-lists end before their first event, and the LIST the informer falls back to gets no
    // answer, until these are turned off: the first sync keeps retrying.
    cluster.sim.endWatchesAtOnce(true);
    cluster.sim.stallLists(true);
    let connecting: Promise<{ code: number | null; stdout: string; stderr: string }> | undefined;
    try {
      connecting = cli(['connect', '--socks', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--json', '--id', 'syncing']);
      const row = await eventually(
        async () => {
          const r = await status('syncing').catch(() => undefined);
          return r?.state === 'starting' && r.cache?.syncing ? r : undefined;
        },
        20_000,
        200,
      );
      // Its first attempts failed: "retrying", with what the attempt under way has listed.
      assert.match(row.cache.state, /^(syncing|retrying)$/);
      assert.deepEqual(row.cache.syncing.services, { listed: 0 });
      const table = await cli(['status', 'syncing']);
      assert.match(table.stdout, /(syncing|retrying) \(.*services 0/);
    } finally {
      cluster.sim.endWatchesAtOnce(false);
      cluster.sim.stallLists(false);
    }
    const r = await connecting!;
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as Connected;
    daemons.add(out.pid);
    const synced = await status('syncing');
    assert.equal(synced.cache.state, 'synced');
    assert.equal((await cli(['disconnect', 'syncing'])).code, 0);
    await gone(out.pid, 10_000);
  });
});

describe('stopped while its cache syncs', () => {
  test('disconnect during the first sync: the daemon exits at once, its state goes, nothing is killed', async () => {
    // Watches and lists get no answer: the first sync cannot finish while this is on.
    cluster.sim.stallWatches(true);
    cluster.sim.stallLists(true);
    try {
      const connecting = cli(['connect', '--socks', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--json', '--id', 'early-stop']);
      const row = await eventually(
        async () => {
          const r = await status('early-stop').catch(() => undefined);
          // Per-kind progress comes from the daemon itself: it is up and in its first sync.
          return r?.state === 'starting' && r.pid && r.cache?.syncing ? r : undefined;
        },
        20_000,
        200,
      );
      const d = await cli(['disconnect', 'early-stop']);
      assert.equal(d.code, 0, d.stderr);
      assert.match(d.stdout, /disconnected early-stop/);
      assert.doesNotMatch(d.stdout, /killed/);
      await gone(row.pid as number, 5_000);
      assert.equal(existsSync(proxyDir('early-stop')), false, 'its state is removed');
      const c = await connecting;
      assert.notEqual(c.code, 0, 'the connect that was waiting says it did not start');
    } finally {
      cluster.sim.stallWatches(false);
      cluster.sim.stallLists(false);
    }
  });
});

describe('crashes and failures', () => {
  test('SIGKILLed daemon: status says dead and drops its credentials; disconnect cleans it', async () => {
    const c = await connect(['--id', 'crash']);
    process.kill(c.pid, 'SIGKILL');
    await gone(c.pid, 5_000);
    const s = await status('crash');
    assert.equal(s.state, 'dead');
    assert.equal(s.socks, null);
    assert.match(s.error, /is gone/);
    assert.ok(!existsSync(path.join(proxyDir('crash'), 'kubeconfig')), 'the kubeconfig is reaped at once');
    assert.ok(!existsSync(path.join(proxyDir('crash'), 'client-auth')), 'so are its generated credentials');
    assert.match((await cli(['status'])).stdout, /crash: dead .*disconnect crash/);
    const d = await cli(['disconnect', 'crash']);
    assert.equal(d.code, 0, d.stderr);
    assert.match(d.stdout, /was not running/);
    assert.ok(!existsSync(proxyDir('crash')));
  });

  test('a stopped (SIGSTOP) daemon: status says it does not answer, and disconnect still stops it', async () => {
    const c = await connect(['--id', 'frozen']);
    assert.equal((await status('frozen')).answering, true);
    process.kill(c.pid, 'SIGSTOP');
    try {
      const s = await status('frozen');
      assert.deepEqual([s.state, s.answering, s.openStreams], ['running', false, null]);
      assert.match((await cli(['status'])).stdout, /^frozen: does not answer on its control socket .*disconnect frozen$/m);
    } finally {
      process.kill(c.pid, 'SIGCONT');
    }
    assert.equal((await status('frozen')).answering, true);
    assert.doesNotMatch((await cli(['status'])).stdout, /does not answer/);
    assert.equal((await cli(['disconnect', 'frozen'])).code, 0);
  });

  test('a taken port: a clear error, a hint, and nothing left behind', async () => {
    const blocker = net.createServer().listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--id', 'taken', '--listen-socks', `127.0.0.1:${port}`]);
      assert.equal(r.code, 1);
      assert.equal(r.stdout, '');
      assert.match(
        r.stderr.trim(),
        new RegExp(`^Error: --listen-socks 127\\.0\\.0\\.1:${port}: the address is already in use .*--listen-socks 127\\.0\\.0\\.1:0`),
      );
      assert.ok(!existsSync(proxyDir('taken')));
      assert.ok(!existsSync(path.join(stateDir, 'logs', 'taken.log')), 'no daemon was started');
    } finally {
      blocker.close();
    }
    const a = await connect(['--id', 'holder']);
    const r = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--id', 'second', '--listen-socks', a.socks!]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /taken by managed proxy holder .*127\.0\.0\.1:0/);
    assert.ok(!existsSync(proxyDir('second')));
    // The foreground proxy on that port (the README's `kubectl proxyout` after a connect) names it too.
    const fg = await cli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', a.socks!]);
    assert.equal(fg.code, 1);
    assert.equal(
      fg.stderr.trim(),
      `Error: cannot listen for SOCKS on ${a.socks}: address already in use: managed proxy holder (context sim, namespace shop) listens there; use it, stop it with \`kubectl proxyout disconnect holder\`, or pick another port`,
    );
    assert.equal((await cli(['disconnect', 'holder'])).code, 0);
  });

  test('API unreachable: connect fails fast and leaves no state', async () => {
    const file = await unreachableKubeconfig(cluster);
    // Against a connect that fails before any network, just before: a loaded machine's slow start
    // of the CLI is not the wait this bounds (the start-up probe's 10 s).
    let started = Date.now();
    const absent = await cli(['connect', '--kubeconfig', path.join(stateDir, 'absent-kubeconfig'), '--listen-socks', '127.0.0.1:0']);
    assert.match(absent.stderr, /does not exist/);
    const startMs = Date.now() - started;
    started = Date.now();
    const r = await cli(['connect', '--kubeconfig', file, '--listen-socks', '127.0.0.1:0']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^Error: cannot reach the API server/);
    const ms = Date.now() - started;
    assert.ok(ms - startMs < 10_000, `fails at once, not after the probe's 10 s bound: ${ms} ms, ${startMs} ms to start and fail here`);
    assert.deepEqual(readdirSync(path.join(stateDir, 'proxies')), []);
  });

  test('a full disk: connect says where it could not write, and leaves nothing behind', async (t) => {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) return t.skip('needs root on Linux to mount a small tmpfs');
    const full = mkdtempSync(path.join(tmpdir(), 'proxyout-full-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,mode=0700', 'tmpfs', full]);
    } catch (err) {
      rmSync(full, { recursive: true, force: true });
      return t.skip(`cannot mount a tmpfs here: ${String(err)}`);
    }
    t.after(() => {
      execFileSync('umount', ['-l', full]);
      rmSync(full, { recursive: true, force: true });
    });
    const state = path.join(full, 'state');
    // The directories first (they take no space on a tmpfs), then every byte taken.
    const ok = await runCli(['status'], { env: { KUBECTL_PROXYOUT_STATE_DIR: state } });
    assert.equal(ok.code, 0, ok.stderr);
    try {
      execFileSync('dd', ['if=/dev/zero', `of=${path.join(full, 'filler')}`, 'bs=4k'], { stdio: 'ignore' });
    } catch {
      // ENOSPC: full, as wanted
    }
    const r = await runCli(['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0'], { env: { KUBECTL_PROXYOUT_STATE_DIR: state } });
    assert.equal(r.code, 1);
    assert.match(r.stderr.trim(), new RegExp(`^Error: cannot write the proxy's files in ${path.join(state, 'proxies')}/\\w+: ENOSPC`), r.stderr);
    assert.deepEqual(readdirSync(path.join(state, 'proxies')), [], 'no directory left behind');
  });

  test('bad credentials and unknown contexts fail before forking', async () => {
    const file = path.join(cluster.dir, 'badtoken');
    await writeFile(file, cluster.sim.kubeconfigYaml({ token: 'not-a-valid-token' }), { mode: 0o600 });
    const bad = await cli(['connect', '--kubeconfig', file, '--listen-socks', '127.0.0.1:0']);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /rejected the credentials/);
    const ctx = await cli(['connect', '--kubeconfig', cluster.kubeconfig, '--context', 'nope', '--listen-socks', '127.0.0.1:0']);
    assert.equal(ctx.code, 1);
    assert.match(ctx.stderr, /context "nope" not found/);
    assert.deepEqual(readdirSync(path.join(stateDir, 'proxies')), []);
  });

  test('unknown IDs and bad IDs are clear errors', async () => {
    for (const args of [
      ['disconnect', 'nope'],
      ['status', 'nope'],
      ['logs', 'nope'],
      ['disconnect', '../x'],
      ['reload', '../x'],
      ['logs', '../x'],
      // A new ID that a command would read as a flag: `disconnect --all` would stop every proxy.
      ['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--id=--all'],
      ['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--id=-x'],
    ]) {
      const r = await cli(args);
      assert.notEqual(r.code, 0, args.join(' '));
      assert.match(r.stderr.trim(), /^Error: (no managed proxy with ID nope|no log for ID nope|invalid connection ID)/, r.stderr);
      assert.equal(r.stderr.trim().split('\n').length, 1, `${args.join(' ')}: one line, no stack: ${r.stderr}`);
    }
    assert.deepEqual(readdirSync(path.join(stateDir, 'proxies')), [], 'no proxy was started for them');
    const both = await cli(['disconnect']);
    assert.equal(both.code, 2);
    // None runs: reload says how a foreground proxy is reloaded instead.
    const none = await cli(['reload']);
    assert.equal(none.code, 1);
    assert.match(none.stderr.trim(), /^Error: no managed proxy is running \(a foreground proxy re-reads its routing table on SIGHUP: kill -HUP PID\)$/);
    // An ID is an argument, never stdin: a script that pipes into the command does not choose it.
    for (const args of [['status'], ['disconnect'], ['logs'], ['reload'], ['pac']]) {
      const r = await runCli(args, { env: env(), input: 'nope\n' });
      assert.doesNotMatch(r.stderr, /ID nope/, `${args[0]} took its ID from stdin`);
    }
  });
});

describe('the daemon', () => {
  test('exec-plugin credentials work from the transient kubeconfig; SIGHUP reopens the log; logs -f ends with the proxy', async () => {
    const file = path.join(cluster.dir, 'exec');
    await cluster.sim.writeKubeconfig(file, { auth: 'exec', context: 'execy', namespace: 'shop' });
    const c = await connect(['--id', 'execy'], file);
    const kc = JSON.parse(readFileSync(path.join(proxyDir('execy'), 'kubeconfig'), 'utf8'));
    assert.equal(kc.users[0].user.exec.command, process.execPath, 'exec kept as it was');
    assert.match((await curl(['--proxy', c.env.ALL_PROXY!, 'http://web.shop:8080/'])).stdout, /hello from web-/);

    renameSync(c.logFile, `${c.logFile}.1`);
    process.kill(c.pid, 'SIGHUP');
    await eventually(async () => existsSync(c.logFile) && readFileSync(c.logFile, 'utf8').includes('log file reopened'), 5_000, 50);
    assert.equal(mode(c.logFile), 0o600);

    // A tokenFile user (kubectl's field) stays a file in the transient kubeconfig, so rotation reaches the daemon.
    const tokenFile = path.join(cluster.dir, 'managed-token');
    await writeFile(tokenFile, `${cluster.sim.adminToken}\n`, { mode: 0o600 });
    const tfKubeconfig = path.join(cluster.dir, 'kc-token-file');
    await writeFile(
      tfKubeconfig,
      cluster.sim.kubeconfigYaml({ token: 'PLACEHOLDER', namespace: 'shop' }).replace('token: "PLACEHOLDER"', 'tokenFile: "managed-token"'),
      { mode: 0o600 },
    );
    // --shutdown-grace 0: its disconnect does not wait ~1 s for curl's stream (the simulated runtime's close grace).
    const tf = await connect(['--id', 'tokenfile', '--shutdown-grace', '0'], tfKubeconfig);
    const tfKc = JSON.parse(readFileSync(path.join(proxyDir('tokenfile'), 'kubeconfig'), 'utf8'));
    assert.deepEqual(tfKc.users[0].user, { tokenFile }, 'an absolute tokenFile, no token copied');
    assert.match((await curl(['--proxy', tf.env.ALL_PROXY!, 'http://web.shop:8080/'])).stdout, /hello from web-/);
    assert.equal((await cli(['disconnect', 'tokenfile'])).code, 0);

    // NODE_OPTIONS=--inspect in the caller's shell: the daemon, which lives all day, opens no inspector.
    const inspected = await connect(['--id', 'no-inspector', '--shutdown-grace', '0'], cluster.kubeconfig, {
      NODE_OPTIONS: '--inspect=127.0.0.1:0 --max-old-space-size=512',
    });
    if (process.platform === 'linux') {
      const environ = readFileSync(`/proc/${inspected.pid}/environ`, 'utf8').split('\0');
      assert.ok(environ.includes('NODE_OPTIONS=--max-old-space-size=512'), environ.filter((e) => e.startsWith('NODE_OPTIONS')).join(' '));
    }
    assert.doesNotMatch(readFileSync(inspected.logFile, 'utf8'), /Debugger listening/);
    assert.equal((await cli(['disconnect', 'no-inspector'])).code, 0);

    const follow = cli(['logs', 'execy', '-f'], 20_000);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await cli(['disconnect', 'execy'])).code, 0);
    const f = await follow;
    assert.equal(f.code, 0, f.stderr);
    assert.match(f.stdout, /daemon exited/, 'followed to the end, then returned');
  });
});
