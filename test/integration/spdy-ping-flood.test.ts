// A server that floods a SPDY tunnel with PINGs and stops reading our echoes (a broken or hostile
// API server or kubelet): the proxy ends that tunnel once 10,000 echoes wait unsent
// (spdy/owed-replies.ts), with one warn line, instead of queueing echoes without bound. The
// tunnel's client connection closes and the next connection to the pod opens a new tunnel. (That
// the queue stays small meanwhile — 10,000 echoes are ~120 KB, nothing the proxy's RSS would
// show — and how the bound treats a peer that reads its echoes, and our own keepalive PINGs:
// test/unit/spdy-tunnel-flood.test.ts.)
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, testTransport, type ProxyProcess } from '../helpers/proxy-process.js';
import { closedWithin, openStream, roundTrip, type OpenStream } from '../helpers/streams.js';

const skip = testTransport() === 'websocket' && 'the per-stream WebSocket transport has no SPDY tunnel';
const WARN = 40;
let cluster: TestCluster;
let proxy: ProxyProcess;

before(async () => {
  if (skip) return;
  cluster = await startTestCluster();
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--transport', 'spdy']);
});

after(async () => {
  if (skip) return;
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  assert.equal(await proxy?.stop(), 0);
  await cluster?.close();
});

async function echoes(s: OpenStream, what: string): Promise<void> {
  const payload = randomBytes(2000);
  assert.ok((await roundTrip(s, payload, 10_000)).equals(payload), what);
}

test('a PING flood whose echoes are never read ends its tunnel with a warn line; the pod is reached again', { skip }, async () => {
  const { ip } = await cluster.sim.createPod({ namespace: 'data', name: 'flood-1', ports: [{ containerPort: 7000, backend: 'echo' }] });
  const held = await eventually(async () => openStream(proxy.socks!, ip, 7000).catch(() => undefined), 10_000, 50);
  await echoes(held, 'the stream before the flood');
  assert.equal(cluster.sim.floodSpdyPings('data', 'flood-1'), 1);
  const line = await eventually(
    async () => proxy.logs.find((l) => l.msg === 'port-forward tunnel flooded with PINGs; closed it' && l.pod === 'data/flood-1'),
    30_000,
    50,
  );
  assert.equal(line.level, WARN);
  assert.match(String(line.error), /PINGs .* faster than it read the replies: 10000 replies unsent/);
  await closedWithin(held.socket, 5_000, 'the client connection on the flooded tunnel');
  const fresh = await openStream(proxy.socks!, ip, 7000);
  await echoes(fresh, 'a new connection, on a new tunnel');
  fresh.socket.destroy();
  assert.equal(proxy.logs.filter((l) => l.msg === 'port-forward tunnel flooded with PINGs; closed it').length, 1);
});
