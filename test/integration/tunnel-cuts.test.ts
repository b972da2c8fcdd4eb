// The SPDY byte stream through the API server's WebSocket tunnel comes in messages cut anywhere
// (streamtunnel.go relays the kubelet connection with io.Copy; through TLS a read returns at
// most one record). Here the simulated tunnel cuts it into 7-byte messages: every DATA frame,
// every kubelet error text, arrives in pieces. Bytes still arrive intact, and an error message is
// judged whole — a refused port is still SOCKS 0x05 and "sandbox not found" still retires the
// tunnel — never by its first few bytes.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, testTransport, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';

const skip = testTransport() === 'websocket' && 'the per-stream WebSocket transport has no SPDY tunnel';
let cluster: TestCluster;
let proxy: ProxyProcess;

before(async () => {
  if (skip) return;
  cluster = await startTestCluster();
  cluster.sim.setTunnelMessageMax(7);
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug', '--transport', 'spdy']);
});

after(async () => {
  if (skip) return;
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  assert.equal(await proxy?.stop(), 0);
  await cluster?.close();
});

test('bytes through 7-byte tunnel messages arrive intact both ways', { skip }, async () => {
  const { reply, socket } = await socks5Connect(proxy.socks!, 'echo.data', 7000);
  assert.equal(reply, 0);
  socket.resume();
  const sent = randomBytes(200_000);
  const got: Buffer[] = [];
  let n = 0;
  const done = new Promise<void>((resolve) =>
    socket.on('data', (d: Buffer) => {
      got.push(d);
      n += d.length;
      if (n >= sent.length) resolve();
    }),
  );
  socket.write(sent);
  await done;
  socket.destroy();
  assert.equal(createHash('sha256').update(Buffer.concat(got)).digest('hex'), createHash('sha256').update(sent).digest('hex'));
});

test("a refused port is SOCKS 0x05 though the kubelet's text comes 7 bytes at a time, and the log has the whole text", { skip }, async () => {
  for (const format of ['text', 'json'] as const) {
    cluster.sim.setKubeletErrorFormat(format);
    const name = `cut-${format}`;
    const { ip } = await cluster.sim.createPod({ namespace: 'shop', name, ports: [{ containerPort: 8080, backend: 'http' }] });
    cluster.sim.refusePort('shop', name, 8080);
    await eventually(
      async () => {
        const { reply, socket } = await socks5Connect(proxy.socks!, ip, 8080);
        socket.destroy();
        return reply !== 4;
      },
      5_000,
      50,
    );
    for (let i = 0; i < 3; i++) {
      const { reply, socket } = await socks5Connect(proxy.socks!, ip, 8080);
      socket.destroy();
      assert.equal(reply, 5, `${format}, attempt ${i + 1}: connection refused`);
    }
    await eventually(
      async () => proxy.logs.some((l) => JSON.stringify(l).includes('connect: connection refused') && JSON.stringify(l).includes(name)),
      5_000,
      50,
    );
  }
  cluster.sim.setKubeletErrorFormat('text');
});

test('"sandbox not found" in pieces still retires the tunnel of a pod that is gone', { skip }, async () => {
  const app = 'cut-stale';
  const pods = [0, 1].map((i) => `${app}-${i}`);
  for (const pod of pods)
    await cluster.sim.createPod({ namespace: 'shop', name: pod, labels: { app }, ports: [{ name: 'http', containerPort: 8080, backend: 'http' }] });
  await cluster.sim.createService({ namespace: 'shop', name: app, selector: { app }, ports: [{ port: 80, targetPort: 8080 }] });
  const get = () => curl(['--proxy', `socks5h://${proxy.socks}`, `http://${app}.shop/`]);
  await eventually(async () => (await get()).code === 0, 10_000, 50);
  for (let i = 0; i < 4; i++) assert.equal((await get()).code, 0, 'warm');
  // The proxy never hears of the deletion: only the kubelet's answer tells it the pod is gone.
  // (The last test of the file: the watches stay frozen.)
  cluster.sim.freezeWatches();
  await cluster.sim.deletePod('shop', pods[1]!);
  await cluster.sim.createPod({ namespace: 'shop', name: pods[1]!, labels: { app }, ports: [{ name: 'http', containerPort: 8080, backend: 'http' }] });
  for (let i = 0; i < 8; i++) {
    const r = await get();
    assert.equal(r.code, 0, `request ${i + 1} after the re-creation: ${r.stderr}`);
  }
  assert.ok(
    proxy.logs.some((l) => l.msg === 'closing the pod tunnel' && String(l.why).includes('sandbox')),
    'the stale tunnel was retired',
  );
});
