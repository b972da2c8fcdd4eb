// Unix-socket listeners (--listen-socks unix:PATH, --listen-http unix:PATH) with the real CLI and
// real curl: modes, stale sockets, refused paths, the client name "unix", the PAC file, and
// another local user (a test user made with useradd when we are root) kept out by the socket's mode.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';

let cluster: TestCluster;
let dir: string;
const mode = (p: string) => statSync(p).mode & 0o777;
const TEST_USER = 'proxyout-uds';

before(async () => {
  cluster = await startTestCluster();
  // Short paths: unix socket paths are limited to ~104 bytes.
  dir = mkdtempSync(path.join(tmpdir(), 'pxu-'));
});

after(async () => {
  await cluster?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Starts the real CLI with unix listeners and waits for its ready lines. */
function startUnixProxy(args: string[]): Promise<ProxyProcess> {
  return startProxyProcess(['--kubeconfig', cluster.kubeconfig, ...args]);
}

describe('a proxy on unix sockets', () => {
  let proxy: ProxyProcess;
  let sub: string;
  let socks: string;
  let http: string;
  before(async () => {
    sub = path.join(dir, 'fresh'); // missing: created 0700
    socks = path.join(sub, 's.sock');
    http = path.join(sub, 'h.sock');
    proxy = await startUnixProxy(['--listen-socks', `unix:${socks}`, '--listen-http', `unix:${http}`]);
  });
  after(async () => {
    await proxy?.stop();
  });

  test('the sockets are 0600 in a 0700 directory it created; ready lines name them in curl’s form', () => {
    assert.equal(mode(sub), 0o700);
    assert.ok(lstatSync(socks).isSocket());
    assert.equal(mode(socks), 0o600);
    assert.equal(mode(http), 0o600);
    assert.ok(proxy.stdout.includes(`export ALL_PROXY=socks5h://localhost${socks}`), proxy.stdout.join('\n'));
    assert.ok(
      proxy.stdout.some(
        (l) => l.includes(`HTTP proxy on unix socket ${http}`) && l.includes(`curl --unix-socket ${http} --request-target http://NAME/ http://NAME/`),
      ),
    );
    assert.ok(!proxy.stdout.some((l) => l.startsWith('export HTTP_PROXY')), 'no variable can name a unix socket for HTTP');
  });

  test('curl reaches a Service through the SOCKS socket (socks5h://localhost/PATH)', async () => {
    const r = await curl(['--proxy', `socks5h://localhost${socks}`, 'http://web.shop:8080/whoami']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal((JSON.parse(r.stdout) as { namespace: string }).namespace, 'shop');
  });

  test('curl reaches a Service through the HTTP socket (--unix-socket with an absolute-form --request-target)', async () => {
    const r = await curl(['--unix-socket', http, '--request-target', 'http://api.shop/whoami', 'http://api.shop/whoami']);
    assert.equal(r.code, 0, r.stderr);
    assert.match((JSON.parse(r.stdout) as { pod: string }).pod, /^api-/);
  });

  test('asking the HTTP socket for the PAC file gets a 404 that says why; the proxy keeps serving', async () => {
    const r = await curl(['-s', '-w', '%{http_code}', '--unix-socket', http, 'http://localhost/proxy.pac']);
    assert.match(r.stdout, /no PAC file: a PAC file needs a SOCKS5 or HTTP listener[^\n]*\n404$/);
    const again = await curl(['--proxy', `socks5h://localhost${socks}`, 'http://web.shop:8080/whoami']);
    assert.equal(again.code, 0, again.stderr);
  });

  test('the client is logged as "unix"', () => {
    const opened = proxy.logs.filter((l) => l.msg === 'stream open');
    assert.ok(opened.length >= 2);
    for (const l of opened) assert.equal(l.client, 'unix');
  });

  test('stopping removes the socket files', async () => {
    await proxy.stop();
    assert.ok(!existsSync(socks));
    assert.ok(!existsSync(http));
  });
});

test('unix: alone is a socket in the state directory; the PAC file leaves unix listeners out', async () => {
  const state = path.join(dir, 'state');
  const proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', 'unix:', '--listen-http', '127.0.0.1:0'], {
    env: { KUBECTL_PROXYOUT_STATE_DIR: state },
  });
  try {
    const socket = path.join(state, 'socks.sock');
    assert.equal(mode(state), 0o700);
    assert.equal(mode(socket), 0o600);
    const viaSocket = await curl(['--proxy', `socks5h://localhost${socket}`, 'http://hello.default/']);
    assert.equal(viaSocket.code, 0, viaSocket.stderr);
    const pac = await curl([`http://${proxy.http}/proxy.pac`]);
    assert.equal(pac.code, 0, pac.stderr);
    assert.match(pac.stdout, /PROXY 127\.0\.0\.1:\d+/);
    assert.doesNotMatch(pac.stdout, /SOCKS|unix|\.sock/);
  } finally {
    await proxy.stop();
  }
});

/** A unix socket left behind by a process killed with SIGKILL (no close, no unlink). */
async function staleSocket(file: string): Promise<void> {
  const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(file)}, () => console.log('up'))`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await once(child.stdout!, 'data');
  child.kill('SIGKILL');
  await once(child, 'exit');
  assert.ok(lstatSync(file).isSocket());
}

describe('what is already at the path', () => {
  test('a stale socket (nothing accepts on it) is replaced', async () => {
    const file = path.join(dir, 'stale.sock');
    await staleSocket(file);
    const proxy = await startUnixProxy(['--listen-socks', `unix:${file}`]);
    try {
      const r = await curl(['--proxy', `socks5h://localhost${file}`, 'http://hello.default/']);
      assert.equal(r.code, 0, r.stderr);
    } finally {
      await proxy.stop();
    }
  });

  test('a socket something listens on is refused, and left alone', async () => {
    const file = path.join(dir, 'live.sock');
    let accepted = 0;
    const server = net
      .createServer((s) => {
        accepted++;
        s.destroy();
      })
      .listen(file);
    await once(server, 'listening');
    try {
      const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', `unix:${file}`]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /^Error: --listen-socks unix:.*live\.sock: another process is listening on this socket/m);
      // Still ours: the path was not unlinked, so new connections still reach this server.
      const before = accepted;
      const still = net.connect(file);
      still.on('error', () => undefined);
      await once(still, 'connect');
      still.destroy();
      while (accepted === before) await new Promise((r) => setTimeout(r, 20));
    } finally {
      server.close();
    }
  });

  test('a path that is not a socket is refused and kept', async () => {
    const file = path.join(dir, 'notes.txt');
    writeFileSync(file, 'important\n');
    const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', `unix:${file}`]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /the path exists and is not a socket; refusing to replace it/);
    assert.ok(lstatSync(file).isFile());
  });

  test('a directory group or others can write is refused', async () => {
    const open = path.join(dir, 'open');
    mkdirSync(open);
    chmodSync(open, 0o777);
    const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', `unix:${path.join(open, 's.sock')}`]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /refusing the directory .*open: group or others can write it \(mode 777\)/);
  });

  test(
    'a socket directory on a read-only file system says so, not "no such file or directory"',
    { skip: (process.platform !== 'linux' || process.getuid?.() !== 0) && 'needs root on Linux (a read-only bind mount)' },
    async () => {
      const readOnly = path.join(dir, 'read-only');
      mkdirSync(readOnly);
      const file = path.join(readOnly, 'sockets', 's.sock');
      const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', `unix:${file}`], {
        via: ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', 'mount --bind -o ro "$0" "$0" && exec "$@"', readOnly],
      });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /^Error: --listen-socks unix:.*\/s\.sock: cannot create .*\/sockets: EROFS: read-only file system/m);
    },
  );
});

/** A test user for the other-uid checks: made with useradd when we are root; undefined (with why) otherwise. */
function otherUser(): { uid: number; gid: number } | string {
  if (process.getuid?.() !== 0) return 'not root: cannot create a second user';
  try {
    execFileSync('id', ['-u', TEST_USER], { stdio: 'ignore' });
  } catch {
    try {
      execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', TEST_USER], { stdio: 'ignore' });
    } catch (err) {
      return `useradd failed: ${(err as Error).message}`;
    }
  }
  const uid = Number(execFileSync('id', ['-u', TEST_USER], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', TEST_USER], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

const other = otherUser();
if (typeof other === 'string') process.stdout.write(`# other-uid tests skipped: ${other}\n`);

/** curl as the other user (setpriv: no PAM, no shell), through the SOCKS socket. */
function curlAs(user: { uid: number; gid: number }, socket: string): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'setpriv',
      [
        `--reuid=${user.uid}`,
        `--regid=${user.gid}`,
        '--clear-groups',
        '--',
        'curl',
        '--silent',
        '--show-error',
        '--max-time',
        '10',
        '--proxy',
        `socks5h://localhost${socket}`,
        'http://hello.default/',
      ],
      (err, _out, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr });
      },
    );
  });
}

describe('another local user', { skip: typeof other === 'string' ? other : false }, () => {
  test('cannot connect to the socket (its mode), while this user can; a path that user owns is refused', async () => {
    const user = other as { uid: number; gid: number };
    // A directory others may enter but not write, so that only the socket's own mode keeps them out.
    const shared = path.join(dir, 'shared');
    mkdirSync(shared, { mode: 0o755 });
    chmodSync(shared, 0o755);
    chmodSync(dir, 0o755);
    const file = path.join(shared, 's.sock');
    const proxy = await startUnixProxy(['--listen-socks', `unix:${file}`]);
    try {
      const mine = await curl(['--proxy', `socks5h://localhost${file}`, 'http://hello.default/']);
      assert.equal(mine.code, 0, mine.stderr);
      const theirs = await curlAs(user, file);
      assert.notEqual(theirs.code, 0);
      assert.match(theirs.stderr, /Permission denied|Failed to connect|Couldn't connect/i);
      // The control: with the mode widened, the same user gets through, so it is the mode that stopped them.
      chmodSync(file, 0o666);
      const widened = await curlAs(user, file);
      assert.equal(widened.code, 0, widened.stderr);
    } finally {
      await proxy.stop();
      chmodSync(dir, 0o700);
    }

    // A socket file another user left at the path is never taken over.
    const foreign = path.join(shared, 'theirs.sock');
    await staleSocket(foreign);
    chownSync(foreign, user.uid, user.gid);
    const r = await runCli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', `unix:${foreign}`]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`refusing a path owned by uid ${user.uid}, not by you`));
    assert.ok(lstatSync(foreign).isSocket());

    // A directory reached through a symlink that user owns (they could re-point it) is refused.
    const link = path.join(dir, 'their-link');
    symlinkSync(shared, link);
    lchownSync(link, user.uid, user.gid);
    const viaLink = await runCli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', `unix:${path.join(link, 'x.sock')}`]);
    assert.equal(viaLink.code, 1);
    assert.match(viaLink.stderr, new RegExp(`refusing the directory .*their-link: it is a symlink owned by uid ${user.uid}, not by you`));

    // Our own 0700 directory inside one that user owns: they could rename ours and put their own
    // socket in its place, so every directory on the way counts, not only the socket's own.
    const theirs = path.join(dir, 'theirs');
    mkdirSync(theirs, { mode: 0o755 });
    chownSync(theirs, user.uid, user.gid);
    const proj = path.join(theirs, 'proj');
    mkdirSync(proj, { mode: 0o700 });
    const under = await runCli(['--kubeconfig', cluster.kubeconfig, '--listen-socks', `unix:${path.join(proj, 's.sock')}`]);
    assert.equal(under.code, 1);
    assert.match(under.stderr, new RegExp(`refusing .*theirs on the way to the socket: it is owned by uid ${user.uid}, who could move .*proj aside`));
  });
});
