// A pod tunnel whose path goes silent while the process runs on (a VPN that reconnected, a NAT
// that forgot the flow; no pause for the wake check to see): streams opened on it get no
// SYN_REPLY, so the pool checks the tunnel with a PING within seconds instead of letting them
// wait for the keepalive (spdy/reply-watch.ts). Keepalive and connect timeout are set long here:
// only that check can explain a stream answered in time. Real CLI, the simulated cluster behind
// a relay that black-holes the connections open at a moment (test/helpers/freezable-proxy.ts).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { startFreezableProxy, type FreezableProxy } from '../helpers/freezable-proxy.js';
import { openStream, roundTrip, closedWithin } from '../helpers/streams.js';
import { socks5Connect } from '../helpers/socks-client.js';

let cluster: TestCluster;
let relay: FreezableProxy;
let proxy: ProxyProcess;
// The Service's name: a Pod IP would need a look-up, and the API connections froze too.
const HOST = 'two-ports.data';

before(async () => {
  cluster = await startTestCluster();
  relay = await startFreezableProxy(Number(new URL(cluster.sim.server).port));
  const kubeconfig = path.join(cluster.dir, 'kc-relay');
  await writeFile(kubeconfig, cluster.sim.kubeconfigYaml({ server: relay.url, namespace: 'data' }), { mode: 0o600 });
  await cluster.sim.createPod({
    namespace: 'data',
    name: 'two-ports',
    labels: { app: 'two-ports' },
    ports: [
      { containerPort: 7000, backend: 'echo' },
      { containerPort: 7001, backend: 'echo' },
    ],
  });
  await cluster.sim.createService({
    namespace: 'data',
    name: 'two-ports',
    selector: { app: 'two-ports' },
    ports: [
      { name: 'a', port: 7000 },
      { name: 'b', port: 7001 },
    ],
  });
  // The keepalive would notice only after 60 + 60 s, the connect timeout after 40 s.
  const slow = ['--keepalive', '60s', '--keepalive-timeout', '60s', '--connect-timeout', '40s'];
  proxy = await startProxyProcess(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug', ...slow]);
});

after(async () => {
  cluster?.sim.endLingeringStreams();
  await proxy?.stop();
  await relay?.close();
  await cluster?.close();
});

test('a stream opened on a tunnel gone silent opens again on a new tunnel within seconds; the old streams fail', async () => {
  const held = await openStream(proxy.socks!, HOST, 7000);
  held.socket.on('error', () => undefined);
  assert.equal((await roundTrip(held, Buffer.from('held\n'))).toString(), 'held\n');
  assert.ok(relay.freeze() >= 1);
  const mark = proxy.logs.length;
  // Port 7001 was never opened: the SOCKS reply waits for the kubelet's replies, which never come
  // on the frozen tunnel.
  const fresh = await openStream(proxy.socks!, HOST, 7001);
  assert.equal((await roundTrip(fresh, Buffer.from('fresh\n'))).toString(), 'fresh\n');
  const lines = proxy.logs.slice(mark);
  assert.ok(
    lines.some((l) => l.msg === 'closing the pod tunnel' && l.why === 'no answer to a PING while streams waited for the kubelet'),
    'the tunnel was closed for its silence',
  );
  assert.ok(lines.some((l) => l.msg === 'the tunnel went silent before the kubelet answered the stream; opened it again on a new tunnel'));
  // The stream that was under way on the dead tunnel fails now, not at the keepalive's verdict.
  await closedWithin(held.socket, 10_000, 'the stream on the silent tunnel');
  fresh.socket.destroy();
});

test('a stream that wrote before the silence was found fails (it is not sent twice); the next one is answered', async () => {
  // A port that accepted lately: the client is told it is connected at once, and writes.
  const warm = await openStream(proxy.socks!, HOST, 7001);
  assert.equal((await roundTrip(warm, Buffer.from('warm\n'))).toString(), 'warm\n');
  warm.socket.destroy();
  assert.ok(relay.freeze() >= 1);
  const { reply, socket } = await socks5Connect(proxy.socks!, HOST, 7001);
  assert.equal(reply, 0, 'connected at once');
  socket.on('error', () => undefined);
  socket.write('may have reached the pod\n');
  await closedWithin(socket, 15_000, 'the written stream on the silent tunnel');
  await eventually(async () => proxy.logs.some((l) => l.msg === 'closing the pod tunnel' && String(l.pod).endsWith('two-ports')), 5_000, 50);
  const next = await openStream(proxy.socks!, HOST, 7001);
  assert.equal((await roundTrip(next, Buffer.from('next\n'))).toString(), 'next\n');
  next.socket.destroy();
});
