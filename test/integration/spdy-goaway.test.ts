// The kubelet ends a SPDY session (spdystream Connection.Close: GOAWAY, later SYN_STREAMs dropped
// without a word) just as a client connects: the client's SYN_STREAMs cross the GOAWAY on the wire.
// The stream is opened again on a new tunnel to the same pod — also when the client was told
// "connected" already and has sent its bytes — instead of waiting for a reply that never comes;
// the transport does it (spdy/goaway-replay.ts), the route with its one endpoint never hears of it.
// Streams the kubelet had taken carry on, and the old session closes once they are done.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, testTransport, type ProxyProcess } from '../helpers/proxy-process.js';
import { Reader, socks5Connect } from '../helpers/socks-client.js';
import { openStream, roundTrip, type OpenStream } from '../helpers/streams.js';

const skip = testTransport() === 'websocket' && 'the per-stream WebSocket transport has no SPDY tunnel';
let cluster: TestCluster;
let proxy: ProxyProcess;
let serial = 0;

before(async () => {
  if (skip) return;
  cluster = await startTestCluster();
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

/** A Service with one echo pod on two ports, and a stream to port 7000 held open (the port is then warm). */
async function podWithHeldStream(): Promise<{ name: string; held: OpenStream }> {
  const name = `goaway-${++serial}`;
  await cluster.sim.createPod({
    namespace: 'data',
    name,
    labels: { app: name },
    ports: [7000, 7001].map((p) => ({ containerPort: p, backend: 'echo' as const })),
  });
  await cluster.sim.createService({
    namespace: 'data',
    name,
    selector: { app: name },
    ports: [7000, 7001].map((p) => ({ name: `p${p}`, port: p, targetPort: p })),
  });
  const held = await eventually(
    async () => {
      const r = await socks5Connect(proxy.socks!, `${name}.data`, 7000);
      if (r.reply === 0) return r;
      r.socket.destroy();
      return undefined;
    },
    10_000,
    50,
  );
  return { name, held: { socket: held.socket, reader: new Reader(held.socket) } };
}

async function echoes(s: OpenStream, what: string): Promise<void> {
  const payload = randomBytes(2000);
  assert.ok((await roundTrip(s, payload, 10_000)).equals(payload), what);
}

for (const port of [7000, 7001]) {
  const kind = port === 7000 ? 'warm: called connected before the kubelet took it' : 'cold: still waiting for its SYN_REPLYs';
  test(`a client connecting as the kubelet goes away gets its echo (${kind})`, { skip }, async () => {
    const { name, held } = await podWithHeldStream();
    await echoes(held, 'the held stream');
    assert.equal(cluster.sim.spdySessionsOf('data', name), 1);
    assert.equal(cluster.sim.goAwaySpdySessions('data', name, { atNextStream: true }), 1);
    const late = await openStream(proxy.socks!, `${name}.data`, port);
    await echoes(late, 'the stream whose SYN_STREAMs crossed the GOAWAY');
    // Told connected or still opening, the stream moved inside the transport; the route never heard.
    const moved = (l: Record<string, unknown>) =>
      l.msg === 'the kubelet did not take the stream (GOAWAY); opened it again on a new tunnel' && l.target === `data/${name}:${port}`;
    await eventually(async () => proxy.logs.some(moved), 5_000, 50);
    assert.ok(
      !proxy.logs.some((l) => l.msg === 'endpoint failed' || String(l.msg).startsWith('pod refused after the stream opened')),
      'nothing for the route to do',
    );
    assert.equal(cluster.sim.spdySessionsOf('data', name), 2, 'a new tunnel took it');
    await echoes(held, 'the stream the kubelet had taken, after the GOAWAY');
    held.socket.destroy();
    await eventually(async () => cluster.sim.spdySessionsOf('data', name) === 1, 10_000, 50);
    await echoes(late, 'the moved stream, after the old session closed');
    late.socket.destroy();
  });
}
