// Head-of-line blocking on a shared SPDY tunnel: SPDY from the kubelet has no flow control, so a
// client that stops reading (a paused download, a process stopped with ^Z) holds the pod's whole
// tunnel once it is 1 MiB behind, and every other stream on that tunnel stalls with it. Counted:
// 1 client that never reads and 4 that echo, all on the one tunnel to the echo pod. The hold is
// shortened for the test (PROXYOUT_TEST_TUNNEL_HOLD_MS); nothing here measures speed.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { openStream, roundTrip, sleep, type OpenStream } from '../helpers/streams.js';

const HOLD_MS = 1500;
let cluster: TestCluster;
let proxy: ProxyProcess;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--transport', 'spdy', '--log-level', 'info'], {
    env: { PROXYOUT_TEST_TUNNEL_HOLD_MS: String(HOLD_MS) },
  });
});

after(async () => {
  cluster?.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster?.close();
});

/**
 * The proxy's lines resetting a held stream. A paused client whose writes have all gone out does
 * not see the reset (nothing reads or writes its socket), so the log is what tells.
 */
function resets(): number {
  return proxy.logs.filter((l) => /did not catch up/.test(String(l.error ?? l.msg))).length;
}

/** A stream to the echo pod whose client sends `bytes` and reads nothing back. */
async function stalledReader(bytes: number, host = 'echo.data'): Promise<{ socket: net.Socket; closed: () => boolean }> {
  const { reply, socket } = await socks5Connect(proxy.socks!, host, 7000);
  assert.equal(reply, 0);
  socket.pause();
  let closed = false;
  socket.on('close', () => (closed = true));
  socket.on('error', () => undefined);
  for (let sent = 0; sent < bytes; sent += 1 << 20) socket.write(randomBytes(1 << 20));
  // Its writes stop moving once the proxy, 1 MiB behind on this stream, holds the tunnel.
  let last = -1;
  await eventually(
    async () => {
      const queued = socket.writableLength;
      const still = queued > 0 && queued === last;
      last = queued;
      return still;
    },
    30_000,
    1000,
  );
  return { socket, closed: () => closed };
}

test('a client that stops reading is reset after a while when others wait on its tunnel, and they go on', async () => {
  const active: OpenStream[] = [];
  for (let i = 0; i < 4; i++) {
    const s = await openStream(proxy.socks!, 'echo.data', 7000);
    assert.equal((await roundTrip(s, Buffer.from(`hello ${i}`))).toString(), `hello ${i}`);
    active.push(s);
  }
  const tunnelsBefore = proxy.logs.filter((l) => l.msg === 'tunnel opened').length;
  // More than the kernel's socket buffers on both sides hold: the proxy falls 1 MiB behind.
  const stalled = await stalledReader(64 << 20);
  assert.equal(proxy.logs.filter((l) => l.msg === 'tunnel opened').length, tunnelsBefore, 'the stalled stream shares the tunnel');
  const echoed = await Promise.allSettled(active.map((s, i) => roundTrip(s, Buffer.from(`again ${i}`), HOLD_MS + 15_000)));
  assert.deepEqual(
    echoed.map((r) => (r.status === 'fulfilled' ? r.value.toString() : `stalled: ${String(r.reason)}`)),
    active.map((_s, i) => `again ${i}`),
    'every active stream goes on',
  );
  await eventually(async () => resets() === 1, 10_000, 100);
  const line = proxy.logs.find((l) => /did not catch up/.test(String(l.error ?? l.msg)));
  assert.match(
    String(line?.error),
    /fell over 1 MiB behind the pod and did not catch up in 1\.5 s, while 4 other streams on the tunnel to pod data\/echo-\S+ waited behind it for the pod's answer/,
  );
  for (const s of active) s.socket.destroy();
  stalled.socket.destroy();
});

test('a client that stops reading alone on its tunnel is left alone', async () => {
  const before = resets();
  const stalled = await stalledReader(64 << 20);
  await sleep(3 * HOLD_MS);
  assert.equal(resets(), before, 'the stream is not reset');
  assert.equal(stalled.closed(), false, 'the stream is still open');
  stalled.socket.destroy();
});

test('a client that stops reading beside an idle stream is left alone until that stream waits for its pod', async () => {
  // A pod of its own: the tunnel to it carries these two streams only.
  await cluster.sim.createPod({ namespace: 'data', name: 'paused-0', labels: { app: 'paused' }, ports: [{ containerPort: 7000, backend: 'echo' }] });
  await cluster.sim.createService({ namespace: 'data', name: 'paused', selector: { app: 'paused' }, ports: [{ port: 7000 }] });
  const idle = await eventually(async () => openStream(proxy.socks!, 'paused.data', 7000).catch(() => undefined), 10_000, 200);
  assert.equal((await roundTrip(idle, Buffer.from('before'))).toString(), 'before');
  const tunnelsBefore = proxy.logs.filter((l) => l.msg === 'tunnel opened').length;
  const before = resets();
  const stalled = await stalledReader(64 << 20, 'paused.data');
  assert.equal(proxy.logs.filter((l) => l.msg === 'tunnel opened').length, tunnelsBefore, 'the stalled stream shares the tunnel');
  await sleep(3 * HOLD_MS);
  assert.equal(resets(), before, 'a paused download beside a keep-alive connection between requests stays');
  assert.equal(stalled.closed(), false);
  assert.equal((await roundTrip(idle, Buffer.from('after'), HOLD_MS + 15_000)).toString(), 'after');
  await eventually(async () => resets() === before + 1, 10_000, 100);
  stalled.socket.destroy();
  idle.socket.destroy();
});
