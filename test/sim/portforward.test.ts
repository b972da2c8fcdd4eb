// The kubelet's WebSocket port-forward (v4 channel protocol) driven by a raw `ws` client.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { SimCluster, deterministicSha256, deterministicBytes } from './cluster.js';
import { seedSampleCluster, SAMPLE } from './sample.js';
import { PfSocket, sleep } from './testkit.js';

const GRACE = 150;
let sim: SimCluster;
const echoPod = SAMPLE.echo.pods[0];

before(async () => {
  sim = await SimCluster.start({ quiet: true, closeGraceMs: GRACE });
  await seedSampleCluster(sim);
});

after(async () => {
  await sim.stop();
});

async function waitFor(pred: () => boolean, what: string, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await sleep(20);
  }
}

const le16 = (n: number): Buffer => {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(n);
  return b;
};

test('both channels start with the port as 2 bytes little-endian; echo round trip', async () => {
  const pf = await PfSocket.open(sim, 'data', echoPod, 'ports=7000');
  assert.equal(pf.ws.protocol, 'v4.channel.k8s.io');
  await pf.until(() => pf.messages.length >= 2, 5000, 'port prefixes');
  assert.deepEqual([pf.messages[0]!.channel, pf.messages[0]!.data], [0, le16(7000)]);
  assert.deepEqual([pf.messages[1]!.channel, pf.messages[1]!.data], [1, le16(7000)]);
  pf.send(0, 'ping\n');
  await pf.until(() => pf.channelBytes(0).length >= 2 + 5, 5000, 'echo');
  assert.equal(pf.channelBytes(0).subarray(2).toString(), 'ping\n');
  pf.ws.close();
  await pf.waitClosed();
  await waitFor(() => sim.openPortForwards === 0, 'session cleanup');
});

test('1 MiB echo round trip keeps every byte (sha256)', async () => {
  const pf = await PfSocket.open(sim, 'data', echoPod, 'ports=7000');
  const data = randomBytes(1 << 20);
  for (let off = 0; off < data.length; off += 100_000) pf.send(0, data.subarray(off, off + 100_000));
  await pf.until(() => pf.count(0) >= 2 + data.length, 10_000, '1 MiB echoed');
  const got = pf.channelBytes(0).subarray(2);
  assert.equal(createHash('sha256').update(got).digest('hex'), createHash('sha256').update(data).digest('hex'));
  assert.ok(
    pf.messages.filter((m) => m.channel === 0).every((m) => m.data.length <= 32 * 1024),
    'server frames are at most 32 KiB',
  );
  pf.ws.close();
  await pf.waitClosed();
});

test('base64 subprotocol: text frames with an ASCII channel digit', async () => {
  const pf = await PfSocket.open(sim, 'shop', 'db-0', 'ports=5432', ['v4.base64.channel.k8s.io']);
  assert.equal(pf.ws.protocol, 'v4.base64.channel.k8s.io');
  await pf.until(() => pf.channelBytes(0).length >= 2 + 'banner db-0\n'.length, 5000, 'banner');
  assert.deepEqual(pf.channelBytes(1), le16(5432));
  assert.equal(pf.channelBytes(0).subarray(2).toString(), 'banner db-0\n');
  pf.send(0, 'select 1;');
  await pf.until(() => pf.channelBytes(0).toString().endsWith('select 1;'), 5000, 'echo after banner');
  pf.ws.close();
  await pf.waitClosed();
});

test('the server picks the first supported subprotocol in the client order', async () => {
  const pf = await PfSocket.open(sim, 'data', echoPod, 'ports=7000', ['v5.channel.k8s.io', 'v4.base64.channel.k8s.io', 'v4.channel.k8s.io']);
  assert.equal(pf.ws.protocol, 'v4.base64.channel.k8s.io');
  pf.ws.close();
  await pf.waitClosed();
});

test('refused dial: port prefixes, then the upstream error text on the error channel, then close 1000', async () => {
  const pf = await PfSocket.open(sim, 'data', echoPod, 'ports=7001');
  await pf.waitClosed();
  assert.equal(pf.closeCode, 1000);
  assert.deepEqual(pf.channelBytes(0), le16(7001));
  const err = pf.channelBytes(1).subarray(2).toString();
  assert.match(
    err,
    /^error forwarding port 7001 to pod [0-9a-f]{64}, uid : failed to execute portforward in network namespace "\/var\/run\/netns\/cni-[0-9a-f-]+": failed to connect to localhost:7001 inside namespace "[0-9a-f]{64}", IPv4: dial tcp4 127\.0\.0\.1:7001: connect: connection refused IPv6 dial tcp6 \[::1\]:7001: connect: connection refused $/,
  );
});

test('refusePort makes a listening port refuse; undo restores it', async () => {
  sim.refusePort('data', echoPod, 7000);
  const pf = await PfSocket.open(sim, 'data', echoPod, 'ports=7000');
  await pf.waitClosed();
  assert.match(pf.channelBytes(1).subarray(2).toString(), /connection refused/);
  sim.refusePort('data', echoPod, 7000, false);
  const ok = await PfSocket.open(sim, 'data', echoPod, 'ports=7000');
  ok.send(0, 'x');
  await ok.until(() => ok.channelBytes(0).length === 3, 5000, 'echo');
  ok.ws.close();
  await ok.waitClosed();
});

test('several ports on one WebSocket: channels 2i / 2i+1; a failing port does not close the others', async () => {
  await sim.createPod({
    namespace: 'data',
    name: 'multi',
    ports: [
      { containerPort: 9000, backend: 'echo' },
      { containerPort: 9001, backend: 'none' },
      { containerPort: 9002, backend: 'banner' },
    ],
  });
  const pf = await PfSocket.open(sim, 'data', 'multi', 'ports=9000&ports=9001,9002');
  await pf.until(() => pf.channelBytes(3).length > 2 && pf.channelBytes(4).length > 2, 5000, 'error on 9001 and banner on 9002');
  for (const [ch, port] of [
    [0, 9000],
    [1, 9000],
    [2, 9001],
    [3, 9001],
    [4, 9002],
    [5, 9002],
  ] as const) {
    assert.deepEqual(pf.channelBytes(ch).subarray(0, 2), le16(port), `channel ${ch}`);
  }
  assert.match(pf.channelBytes(3).toString(), /error forwarding port 9001/);
  pf.send(0, 'still here');
  await pf.until(() => pf.channelBytes(0).subarray(2).toString() === 'still here', 5000, 'echo on port 9000');
  assert.equal(pf.closeCode, undefined);
  pf.send(1, 'ignored: error channels are write-only');
  pf.send(9, 'ignored: no such channel');
  pf.ws.close();
  await pf.waitClosed();
  await sim.deletePod('data', 'multi');
});

test('HTTP through the tunnel: /bytes/N matches deterministicSha256; backend close → WebSocket close after the grace', async () => {
  const n = 3 * 1024 * 1024 + 7;
  const pod = SAMPLE.web.pods[0];
  const pf = await PfSocket.open(sim, 'shop', pod, `ports=${SAMPLE.web.containerPort}`);
  pf.send(0, `GET /bytes/${n} HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n`);
  await pf.waitClosed(10_000);
  const all = pf.channelBytes(0).subarray(2);
  const i = all.indexOf('\r\n\r\n');
  assert.match(all.subarray(0, i).toString(), /^HTTP\/1\.1 200 OK/);
  const body = all.subarray(i + 4);
  assert.equal(body.length, n);
  assert.equal(createHash('sha256').update(body).digest('hex'), deterministicSha256(n));
  assert.deepEqual(body.subarray(0, 8), deterministicBytes(8));
  assert.equal(pf.closeCode, 1000);
  // No half-close in v4: after the backend's FIN the runtime waits (up to 1 s in containerd) for
  // the other direction before closing, so even a tiny response is followed by the close only later.
  const small = await PfSocket.open(sim, 'shop', pod, `ports=${SAMPLE.web.containerPort}`);
  const sentAt = Date.now();
  small.send(0, 'GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n');
  await small.waitClosed();
  assert.match(small.channelBytes(0).subarray(2).toString(), /hello from web-/);
  assert.ok(small.closedAt! - sentAt >= GRACE, `closed ${small.closedAt! - sentAt} ms after the request`);
  assert.equal(pf.channelBytes(1).length, 2, 'no error text for a clean backend close');
});

test('a slow reader does not make the server buffer the whole download', async () => {
  const n = 96 * 1024 * 1024;
  const pod = SAMPLE.web.pods[1];
  const pf = await PfSocket.open(sim, 'shop', pod, `ports=${SAMPLE.web.containerPort}`);
  const base = process.memoryUsage().arrayBuffers;
  pf.ws.pause();
  pf.send(0, `GET /bytes/${n} HTTP/1.1\r\nHost: web\r\n\r\n`);
  await sleep(700);
  const grown = process.memoryUsage().arrayBuffers - base;
  assert.ok(grown < 32 * 1024 * 1024, `server-side buffering grew by ${grown} bytes while the client was paused`);
  pf.ws.terminate();
  await pf.waitClosed();
  await waitFor(() => sim.openPortForwards === 0, 'server-side session cleanup after an abrupt client disconnect');
});

test('a backend reset mid-stream: error text on the error channel after the grace, then close 1000', async () => {
  const pf = await PfSocket.open(sim, 'data', echoPod, 'ports=7000');
  pf.send(0, 'abc');
  await pf.until(() => pf.count(0) === 5, 5000, 'echo');
  assert.equal(sim.resetPodConnections('data', echoPod), 1);
  await pf.waitClosed();
  assert.equal(pf.closeCode, 1000);
  assert.match(
    pf.channelBytes(1).subarray(2).toString(),
    /^error forwarding port 7000 to pod [0-9a-f]{64}, uid : failed to execute portforward in network namespace "[^"]+": read tcp4 127\.0\.0\.1:\d+->127\.0\.0\.1:7000: read: connection reset by peer$/,
  );
});

test('deletePod tears down open port-forwards to it', async () => {
  await sim.createPod({ namespace: 'data', name: 'doomed', ports: [{ containerPort: 7000, backend: 'echo' }] });
  const pf = await PfSocket.open(sim, 'data', 'doomed', 'ports=7000');
  await pf.until(() => pf.messages.length >= 2, 5000, 'prefixes');
  assert.equal(sim.openPortForwards, 1);
  await sim.deletePod('data', 'doomed');
  await pf.waitClosed(2000);
  await waitFor(() => sim.openPortForwards === 0, 'session cleanup');
});

test('HTTP errors before the upgrade, worded as upstream', async () => {
  const fail = async (ns: string, pod: string, query: string, protocols?: string[], token?: string): Promise<{ status: number; body: string }> => {
    try {
      const pf = await PfSocket.open(sim, ns, pod, query, protocols, token);
      pf.ws.close();
      throw new Error('unexpectedly upgraded');
    } catch (e) {
      return e as { status: number; body: string };
    }
  };
  const missing = await fail('shop', 'nope', 'ports=80');
  assert.equal(missing.status, 404);
  assert.equal(JSON.parse(missing.body).message, 'pods "nope" not found');
  const noPort = await fail('data', echoPod, '');
  assert.deepEqual([noPort.status, noPort.body], [400, 'query parameter "port" is required\n']);
  const zero = await fail('data', echoPod, 'ports=0');
  assert.deepEqual([zero.status, zero.body], [400, 'port "0" must be > 0\n']);
  const junk = await fail('data', echoPod, 'ports=http');
  assert.equal(junk.status, 400);
  assert.equal(JSON.parse(junk.body).message, 'cannot convert to []int32: strconv.ParseUint: parsing "http": invalid syntax');
  const proto = await fail('data', echoPod, 'ports=7000', ['v5.channel.k8s.io', 'channel.k8s.io']);
  assert.equal(proto.status, 403);
  await sim.createPod({ namespace: 'data', name: 'starting', phase: 'Pending', ports: [{ containerPort: 7000, backend: 'echo' }] });
  const pending = await fail('data', 'starting', 'ports=7000');
  assert.deepEqual([pending.status, pending.body], [500, 'pod not found ("starting_data")\n']);
  const scoped = sim.issueToken({ namespaces: ['shop'] });
  const forbidden = await fail('data', echoPod, 'ports=7000', undefined, scoped);
  assert.equal(forbidden.status, 403);
  // A WebSocket upgrade is a GET: RBAC's first question is get.
  assert.match(JSON.parse(forbidden.body).message, /cannot get resource "pods\/portforward" in API group "" in the namespace "data"/);
  const unauth = await fail('data', echoPod, 'ports=7000', undefined, 'bogus');
  assert.equal(unauth.status, 401);
});

test('no subprotocol requested: upstream echoes an empty Sec-WebSocket-Protocol, which `ws` rejects', async () => {
  await assert.rejects(PfSocket.open(sim, 'data', echoPod, 'ports=7000', []), /Server sent a subprotocol but none was requested/);
});

test('port-forward requests are counted', async () => {
  sim.resetCounters();
  const pf = await PfSocket.open(sim, 'data', echoPod, 'ports=7000');
  pf.ws.close();
  await pf.waitClosed();
  assert.equal(sim.counters.portForward, 1);
  assert.equal(sim.counters.total, 1);
});
