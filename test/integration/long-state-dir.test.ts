// A state directory whose proxies/ID/control.sock is longer than a unix socket path may be (as
// macOS's ~/Library/Application Support/… is for a long user name or ID): `connect` starts the
// daemon with its control socket in the private socket directory under $TMPDIR, and `status`,
// `disconnect` find it there, also from a shell with another $TMPDIR (cron, sudo, ssh; macOS
// gives each login session its own).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { connectManaged } from '../helpers/managed-proxies.js';
import { runCli } from '../helpers/proxy-process.js';
import { statusItem } from '../helpers/status-json.js';
import { curl } from '../helpers/curl.js';
import { controlEndpoint } from '../../src/state/paths.js';

let cluster: TestCluster;
let base: string;

before(async () => {
  cluster = await startTestCluster();
  base = mkdtempSync(path.join(tmpdir(), 'pxl-'));
});
after(async () => {
  await cluster?.close();
  rmSync(base, { recursive: true, force: true });
});

test(
  'a control socket too long for the state directory: connect, status and disconnect still work',
  { skip: process.platform === 'win32' && 'named pipes' },
  async (t) => {
    const stateDir = path.join(base, 's'.repeat(80));
    const tmp = path.join(base, 't');
    const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir, TMPDIR: tmp };
    // Whatever fails below, no daemon outlives the test.
    t.after(() => runCli(['disconnect', '--all'], { env }));
    const prevTmp = process.env.TMPDIR;
    process.env.TMPDIR = tmp; // connectManaged's env has the state directory only
    let id: string;
    let socks: string;
    try {
      ({ id, socks } = await connectManaged(stateDir, cluster.kubeconfig));
    } finally {
      if (prevTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = prevTmp;
    }
    const socketDir = path.join(tmp, `kubectl-proxyout-${process.getuid!()}`);
    assert.equal(readdirSync(socketDir).filter((f) => /^control-[0-9a-f]{16}\.sock$/.test(f)).length, 1, 'the control socket is under $TMPDIR');
    const r = await curl(['--proxy', `socks5h://${socks}`, 'http://web.shop:8080/']);
    assert.match(r.stdout, /hello from web-/);
    const status = await runCli(['status', id, '--json'], { env });
    assert.equal(status.code, 0, status.stderr);
    const item = statusItem(status.stdout);
    assert.equal(item.state, 'running');
    assert.equal(item.answering, true, `the daemon answers on its control socket: ${status.stdout}`);
    assert.equal(item.totalStreams, 1);
    // Another shell, whose temporary directory is elsewhere: it asks where connect put the socket.
    const other = { ...env, TMPDIR: path.join(base, 'other') };
    const elsewhere = statusItem((await runCli(['status', id, '--json'], { env: other })).stdout);
    assert.equal(elsewhere.answering, true, 'status from a shell with another TMPDIR reaches the daemon');
    const reload = await runCli(['reload', id], { env: other, timeoutMs: 60_000 });
    assert.equal(reload.code, 0, reload.stderr);
    const stop = await runCli(['disconnect', id], { env: other });
    assert.equal(stop.code, 0, stop.stderr);
    assert.deepEqual(readdirSync(socketDir), [], 'its control socket is gone with it');
    assert.equal(existsSync(path.join(stateDir, 'proxies', id)), false);
  },
);

test(
  "another user's socket where a shell with another $TMPDIR looks for the control socket is never asked",
  { skip: (process.platform === 'win32' || process.getuid?.() !== 0) && 'needs root to plant a socket as another user' },
  async (t) => {
    const stateDir = path.join(base, 'v'.repeat(80));
    const ours = path.join(base, 'ours');
    const shared = path.join(base, 'shared');
    const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir, TMPDIR: ours };
    t.after(() => runCli(['disconnect', '--all'], { env }));
    const prevTmp = process.env.TMPDIR;
    process.env.TMPDIR = ours;
    let id: string;
    try {
      ({ id } = await connectManaged(stateDir, cluster.kubeconfig));
    } finally {
      if (prevTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = prevTmp;
    }
    // Another user (nobody) holds kubectl-proxyout-UID in the temporary directory a later shell
    // has ($TMPDIR unset over ssh: /tmp), with a socket under the name that shell computes.
    const theirs = path.join(shared, `kubectl-proxyout-${process.getuid!()}`);
    mkdirSync(theirs, { recursive: true, mode: 0o755 });
    const planted = controlEndpoint(stateDir, id, process.platform, { tmp: shared });
    assert.equal(path.dirname(planted), theirs);
    const asked: string[] = [];
    const fake = net.createServer((s) => {
      s.on('data', (d) => {
        asked.push(String(d));
        s.end(`${JSON.stringify({ ok: true, pac: 'function FindProxyForURL() { return "PROXY evil.example:3128"; }' })}\n`);
      });
    });
    await new Promise<void>((resolve) => fake.listen(planted, resolve));
    t.after(() => fake.close());
    chmodSync(planted, 0o777);
    chownSync(planted, 65534, 65534);
    chownSync(theirs, 65534, 65534);
    const shell = { env: { KUBECTL_PROXYOUT_STATE_DIR: stateDir, TMPDIR: shared } };
    // connect recorded where it put the socket: that one is asked, wherever this shell would look.
    const recorded = await runCli(['pac', id], shell);
    assert.equal(recorded.code, 0, recorded.stderr);
    assert.doesNotMatch(recorded.stdout, /evil/);
    assert.match(recorded.stdout, /FindProxyForURL/);
    // An entry written before the path was recorded: this shell computes it, and finds theirs.
    const stateFile = path.join(stateDir, 'proxies', id, 'state.json');
    const { controlSocket, ...older } = JSON.parse(readFileSync(stateFile, 'utf8')) as { controlSocket?: string };
    assert.ok(controlSocket, 'connect recorded the socket it placed under its own TMPDIR');
    writeFileSync(stateFile, JSON.stringify(older), { mode: 0o600 });
    const pac = await runCli(['pac', id], shell);
    writeFileSync(stateFile, JSON.stringify({ ...older, controlSocket }), { mode: 0o600 });
    assert.doesNotMatch(pac.stdout, /evil/, 'their PAC file is not handed out as ours');
    assert.notEqual(pac.code, 0);
    assert.match(pac.stderr, /owned by uid 65534/);
    assert.deepEqual(asked, [], 'their socket is not even asked');
  },
);
