// An ssh route's SSH login ends when the route is closed — by a reload that removes it, or at
// shutdown — also after a stream on it was cut with data still unread (a client that left
// mid-download): ssh2 closes a channel only once its data has been read to the end, so such a
// channel never closed, and the route waited for it for ever (ssh/channel-end.ts). Real CLI, real
// OpenSSH jump hosts in network namespaces (test/helpers/ssh-lab.ts), a simulated cluster as the
// default route.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { sshLabUnavailable, startSshLab, TARGET, type SshLab } from '../helpers/ssh-lab.js';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { writeUntilStalled } from '../helpers/streams.js';

const unavailable = sshLabUnavailable();
let lab: SshLab;
let cluster: TestCluster;
let home = '';
const configFile = () => path.join(lab.dir, 'proxyout.yaml');
const TARGET_STREAM = `${TARGET.name}:${TARGET.echoPort}`;

const table = (withSsh: boolean) =>
  [
    'routes:',
    '  - name: sim',
    '    kind: cluster',
    '    default: true',
    ...(withSsh ? ['  - name: jump', '    kind: ssh', '    ssh: { host: jump2 }', `    include: [${TARGET.name}]`] : []),
    '',
  ].join('\n');

before(async () => {
  if (unavailable) return;
  lab = await startSshLab();
  cluster = await startTestCluster();
  home = path.join(lab.dir, 'home');
  await mkdir(path.join(home, '.ssh'), { recursive: true, mode: 0o700 });
  const knownHosts = path.join(home, '.ssh', 'known_hosts');
  await writeFile(knownHosts, `${lab.knownHostsLines.jump1}\n${lab.knownHostsLines.jump2}\n`);
  await copyFile(lab.writeConfig('close', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${knownHosts}`] }), path.join(home, '.ssh', 'config'));
});

after(async () => {
  await cluster?.close();
  await lab?.close();
});

async function startProxy(): Promise<ProxyProcess> {
  await eventually(async () => lab.jump1Sessions === 0, 10_000);
  await writeFile(configFile(), table(true));
  return startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--config', configFile(), '--listen-socks', '127.0.0.1:0', '--shutdown-grace', '1s'], {
    env: { HOME: home, SSH_AUTH_SOCK: '' },
  });
}

/**
 * A stream to the target's echo port whose client sends and never reads, until nothing moves:
 * the proxy has stopped reading the SSH channel (the client is not taking its bytes) and the
 * channel holds data nobody has read. Then the client leaves with a reset.
 */
async function streamCutWithDataUnread(proxy: ProxyProcess): Promise<void> {
  const { reply, socket } = await socks5Connect(proxy.socks!, TARGET.name, TARGET.echoPort);
  assert.equal(reply, 0);
  socket.on('error', () => undefined);
  assert.equal(lab.jump1Sessions, 1, 'the route logged in to jump1');
  await writeUntilStalled(socket, 1500);
  socket.resetAndDestroy();
  // The relay ends: the channel it destroyed closes at once, its data unread, though jump2 does
  // not answer our CHANNEL_CLOSE while the echo server is not reading (OpenSSH waits for that).
  await eventually(
    async () => proxy.logs.some((l) => typeof l.msg === 'string' && l.msg.startsWith('stream closed') && l.target === TARGET_STREAM),
    10_000,
  ).catch(() => {
    throw new Error('the relay of the cut stream never ended');
  });
}

test('a reload that removes an ssh route ends its login, after a stream on it was cut with data unread', { skip: unavailable }, async () => {
  const proxy = await startProxy();
  try {
    await streamCutWithDataUnread(proxy);
    await writeFile(configFile(), table(false));
    proxy.proc.kill('SIGHUP');
    await eventually(async () => proxy.logs.some((l) => l.msg === 'routing table reloaded'), 20_000);
    await eventually(async () => lab.jump1Sessions === 0, 10_000).catch(() => {
      throw new Error(`the removed route's SSH login stayed (${lab.jump1Sessions} session(s) on jump1)`);
    });
  } finally {
    await proxy.stop('SIGKILL');
  }
});

test('shutdown ends the login and the process, after a stream on the route was cut with data unread', { skip: unavailable }, async () => {
  const proxy = await startProxy();
  try {
    await streamCutWithDataUnread(proxy);
    const exited = proxy.stop('SIGTERM');
    // The bound's timer is cleared once the race is decided: left running, it kept the file's process alive 15 s after its last test.
    let bound: NodeJS.Timeout | undefined;
    const code = await Promise.race([exited, new Promise((r) => (bound = setTimeout(() => r('still running'), 15_000)))]).finally(() => clearTimeout(bound));
    assert.equal(code, 0, 'the proxy exited after SIGTERM');
    await eventually(async () => lab.jump1Sessions === 0, 10_000);
  } finally {
    await proxy.stop('SIGKILL');
  }
});
