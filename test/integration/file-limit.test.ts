// A proxy under a low open-file limit (ulimit -n 256: a shell's, a container's): clients beyond
// what fits are refused with a SOCKS reply naming the limit, never reset unseen at accept.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { binPath, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect, splitHostPort } from '../helpers/socks-client.js';
import { sleep } from '../helpers/streams.js';

const LIMIT = 256;
/** More clients than the limit has files for. */
const CLIENTS = 280;

let cluster: TestCluster;
before(async () => {
  cluster = await startTestCluster();
});
after(async () => {
  await cluster?.close();
});

describe(`ulimit -n ${LIMIT}`, { skip: process.platform === 'win32' && 'no ulimit' }, () => {
  let proxy: ProxyProcess;
  before(async () => {
    // `ulimit -n` sets both limits: Node cannot raise its soft limit past this one.
    const command = ['/bin/sh', '-c', `ulimit -n ${LIMIT} && exec "$0" "$@"`, process.execPath, binPath];
    proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0'], { command });
  });
  after(async () => {
    await proxy?.stop();
  });

  test('held streams beyond what fits: each client is answered, the refusals name the limit, and it serves once they leave', async () => {
    const held: net.Socket[] = [];
    const answers = new Map<string, number>();
    // In small batches, as a browser opens them: a burst of simultaneous accepts beyond the
    // limit is dropped by the runtime before the proxy sees it.
    for (let i = 0; i < CLIENTS; i += 10) {
      const batch = await Promise.all(
        Array.from({ length: 10 }, () =>
          socks5Connect(proxy.socks!, 'echo.data', 7000).then(
            (r) => r,
            (err: NodeJS.ErrnoException) => ({ reply: `no reply (${err.code ?? err.message})`, socket: undefined }),
          ),
        ),
      );
      for (const r of batch) {
        const key = String(r.reply);
        answers.set(key, (answers.get(key) ?? 0) + 1);
        if (r.reply === 0) held.push(r.socket!);
        else r.socket?.destroy();
      }
    }
    assert.deepEqual(
      [...answers.keys()].filter((k) => k !== '0' && k !== '1'),
      [],
      'every client answered (0x00 or 0x01)',
    );
    const warned = proxy.logs.find((l) => l.openFileLimit === LIMIT);
    const cap = warned?.maxStreams as number;
    assert.ok(cap > 0 && 2 * cap < LIMIT, `at most half the limit: ${cap}`);
    assert.deepEqual(Object.fromEntries(answers), { 0: cap, 1: CLIENTS - cap }, 'the first streams open, the rest are refused');
    const refused = proxy.logs.find((l) => l.reason === 'overloaded');
    assert.match(String(refused?.msg), new RegExp(`the limit is ${cap}, as the open-file limit \\(ulimit -n\\) is ${LIMIT}`));
    for (const s of held) s.destroy();
    const again = await eventually(
      async () => {
        const r = await socks5Connect(proxy.socks!, 'web.shop', 8080);
        if (r.reply !== 0) r.socket.destroy();
        return r.reply === 0 && r.socket;
      },
      10_000,
      250,
    );
    again.destroy();
  });
});

describe(`ulimit -n ${LIMIT}, every file taken by idle clients`, { skip: process.platform === 'win32' && 'no ulimit' }, () => {
  let proxy: ProxyProcess;
  before(async () => {
    const command = ['/bin/sh', '-c', `ulimit -n ${LIMIT} && exec "$0" "$@"`, process.execPath, binPath];
    // Idle clients stay until the test lets them go.
    const args = ['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--handshake-timeout', '60s'];
    proxy = await startProxyProcess(args, { command });
  });
  after(async () => {
    await proxy?.stop();
  });

  test('a tunnel that cannot be dialled (EMFILE) is an overload, not an API server away: the route stays ready', async () => {
    const [host, port] = splitHostPort(proxy.socks!);
    // Connections that send nothing, until the proxy has no file left to accept one (libuv then
    // closes it at once). One is let go, for the client below.
    const idle: net.Socket[] = [];
    for (let dropped = false; !dropped;) {
      const batch = Array.from({ length: 10 }, () => net.connect(port, host).on('error', () => undefined));
      await sleep(100);
      for (const s of batch) if (s.destroyed || s.readableEnded) dropped = true;
      idle.push(...batch.filter((s) => !s.destroyed && !s.readableEnded));
      assert.ok(idle.length < LIMIT, 'the proxy drops a connection before the limit');
    }
    idle.pop()!.destroy();
    await sleep(200);
    // Its stream needs a tunnel, which needs a connection to the API server: no file for it.
    const r = await socks5Connect(proxy.socks!, 'echo.data', 7000);
    r.socket.destroy();
    assert.equal(r.reply, 0x01);
    const failed = await eventually(async () => proxy.logs.find((l) => String(l.msg).startsWith('stream failed')), 5_000, 50);
    assert.equal(failed.reason, 'overloaded', String(failed.msg));
    assert.match(String(failed.msg), /EMFILE/);
    for (const s of idle) s.destroy();
    await sleep(300);
    // At once, not after a second of "the API server does not answer".
    const again = await socks5Connect(proxy.socks!, 'echo.data', 7000);
    again.socket.destroy();
    assert.equal(again.reply, 0, 'served as soon as files are free');
    assert.equal(
      proxy.logs.find((l) => String(l.msg).includes('route degraded')),
      undefined,
      'the route was never degraded',
    );
  });
});
