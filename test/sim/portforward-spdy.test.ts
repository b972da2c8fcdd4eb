// The simulated kubelet's SPDY port-forward, driven by raw SPDY sessions: tunnelled in a
// WebSocket and plain, pairing, dialling, FIN/RST, the kubelet's texts, and the 1.29-like switch.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { SimCluster } from './cluster.js';
import { seedSampleCluster, SAMPLE } from './sample.js';
import { RawSpdy, type RefusedUpgrade } from './spdy-testkit.js';
import { TunnelRefusal } from '../../src/tunnel/spdy/tunnel.js';

const GRACE = 100;
let sim: SimCluster;
const echoPod = SAMPLE.echo.pods[0];
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

before(async () => {
  sim = await SimCluster.start({ quiet: true, closeGraceMs: GRACE, streamCreationTimeoutMs: 300 });
  await seedSampleCluster(sim);
});

after(async () => {
  await sim.stop();
});

test('tunnel: SYN_REPLY at once, echo, client FIN → FIN on both streams after the runtime grace', async () => {
  const raw = await RawSpdy.tunnel(sim, 'data', echoPod);
  const { error, data } = raw.pair(7000, 0);
  await raw.until(() => error.replied && data.replied, 'both SYN_REPLYs');
  const payload = randomBytes(300_000);
  data.stream.write(payload);
  await raw.until(() => data.bytes.length === payload.length, 'echo');
  assert.equal(sha(data.bytes), sha(payload));
  const finAt = Date.now();
  data.stream.end();
  await raw.until(() => data.ended && error.ended, 'FIN on data and error streams');
  assert.ok(Date.now() - finAt >= GRACE - 10, 'the runtime waits for the other direction first');
  assert.equal(error.text, '');
  assert.equal(raw.session.activeStreams, 1, 'our error stream is still open our way');
  raw.close();
});

test('many pairs on one session; requestid pairing, any order', async () => {
  const raw = await RawSpdy.tunnel(sim, 'data', echoPod);
  const before = sim.counters.portForward;
  // Data streams first for half of them: the kubelet pairs by requestid, not by order.
  const pairs = Array.from({ length: 20 }, (_, i) => {
    if (i % 2) {
      const data = raw.open({ streamtype: 'data', port: '7000', requestid: String(i) });
      const error = raw.open({ streamtype: 'error', port: '7000', requestid: String(i) });
      return { error, data };
    }
    return raw.pair(7000, i);
  });
  await raw.until(() => pairs.every((p) => p.data.replied), 'replies');
  for (const [i, p] of pairs.entries()) p.data.stream.write(Buffer.from(`message ${i}`));
  await raw.until(() => pairs.every((p, i) => p.data.text === `message ${i}`), 'every echo on its own stream');
  assert.equal(sim.counters.portForward, before);
  assert.equal(sim.openSpdySessions, 1);
  raw.close();
  await raw.until(() => sim.openSpdySessions === 0, 'session gone after GOAWAY');
});

const REFUSED_TEXT =
  /^error forwarding port 7001 to pod [0-9a-f]{64}, uid : failed to execute portforward in network namespace "\/var\/run\/netns\/cni-[0-9a-f-]+": failed to connect to localhost:7001 inside namespace "[0-9a-f]{64}", IPv4: dial tcp4 127\.0\.0\.1:7001: connect: connection refused IPv6 dial tcp6 \[::1\]:7001: connect: connection refused $/;

test('refused dial, containerd order: FIN on the data stream, the error text, RST on the error stream', async () => {
  const raw = await RawSpdy.tunnel(sim, 'data', echoPod);
  const { error, data } = raw.pair(7001, 0);
  await raw.until(() => error.reset !== undefined && data.ended, 'data FIN and error RST');
  assert.equal(data.reset, undefined);
  assert.match(error.text, REFUSED_TEXT);
  assert.equal(error.reset, 5);
  // The session carries on.
  const ok = raw.pair(7000, 1);
  ok.data.stream.write(Buffer.from('still here'));
  await raw.until(() => ok.data.text === 'still here', 'echo after a failed pair');
  raw.close();
});

test('refused dial, the other frame orders and the JSON error format', async () => {
  try {
    sim.setSpdyFailureFrames('text-then-rst');
    let raw = await RawSpdy.tunnel(sim, 'data', echoPod);
    let p = raw.pair(7001, 0);
    await raw.until(() => p.error.reset !== undefined && p.data.reset !== undefined, 'RST on both');
    assert.match(p.error.text, REFUSED_TEXT);
    sim.setSpdyFailureFrames('text-first');
    p = raw.pair(7001, 1);
    await raw.until(() => p.error.ended && p.data.ended, 'FIN on both');
    assert.match(p.error.text, REFUSED_TEXT);
    sim.setSpdyFailureFrames('rst-only');
    p = raw.pair(7001, 2);
    await raw.until(() => p.error.reset !== undefined && p.data.reset !== undefined, 'RST on both');
    assert.equal(p.error.text, '');
    sim.setSpdyFailureFrames('containerd');
    sim.setKubeletErrorFormat('json');
    p = raw.pair(7001, 3);
    await raw.until(() => p.error.reset !== undefined, 'error RST');
    const parsed = JSON.parse(p.error.text) as { closeConnection: boolean; message: string };
    assert.equal(parsed.closeConnection, true);
    assert.match(parsed.message, REFUSED_TEXT);
    sim.setSpdyFailureFrames('goaway');
    p = raw.pair(7001, 4);
    await raw.until(() => raw.closed, 'the session ends');
    raw = await RawSpdy.tunnel(sim, 'data', echoPod);
    raw.close();
  } finally {
    sim.setSpdyFailureFrames('containerd');
    sim.setKubeletErrorFormat('text');
  }
});

test('invalid streams are reset without a reply; an unpaired stream times out with the kubelet text', async () => {
  const raw = await RawSpdy.tunnel(sim, 'data', echoPod);
  const noPort = raw.open({ streamtype: 'data', requestid: '0' });
  const badPort = raw.open({ streamtype: 'data', port: '70000', requestid: '1' });
  const badType = raw.open({ streamtype: 'other', port: '7000', requestid: '2' });
  await raw.until(() => [noPort, badPort, badType].every((s) => s.reset === 5), 'RST CANCEL');
  assert.ok([noPort, badPort, badType].every((s) => !s.replied));
  const lonely = raw.open({ streamtype: 'error', port: '7000', requestid: '9' });
  await raw.until(() => lonely.text.length > 0, 'timeout text', 3000);
  assert.match(lonely.text, /^\(conn=&\{.*\}, request=9\) timed out waiting for streams$/);
  raw.close();
});

test('the kubelet going away (spdystream Connection.Close): GOAWAY names the last stream taken, a SYN_STREAM that crossed it is dropped without a word, open pairs carry on, the connection closes once they are done', async () => {
  const raw = await RawSpdy.tunnel(sim, 'data', echoPod);
  const held = raw.pair(7000, 0);
  await raw.until(() => held.data.replied, 'reply');
  assert.equal(sim.goAwaySpdySessions('data', echoPod, { atNextStream: true }), 1);
  assert.equal(raw.goAwayLastGood, undefined, 'armed: nothing sent yet');
  const crossed = raw.pair(7000, 1);
  await raw.until(() => raw.goAwayLastGood !== undefined, 'GOAWAY');
  assert.equal(raw.goAwayLastGood, held.data.stream.id, 'the last stream the kubelet took');
  assert.ok(crossed.error.unprocessed && crossed.data.unprocessed);
  assert.ok(!crossed.error.replied && !crossed.data.replied);
  assert.equal(sim.openSpdyStreamPairs, 1, 'the crossing pair never reached the kubelet');
  held.data.stream.write(Buffer.from('after GOAWAY'));
  await raw.until(() => held.data.text === 'after GOAWAY', 'the pair taken before carries on');
  assert.equal(raw.closed, false);
  held.data.stream.end();
  held.error.stream.end();
  await raw.until(() => held.data.ended && held.error.ended, 'FIN both ways');
  await raw.until(() => raw.closed, 'the kubelet closes the connection once its streams are done');

  const idle = await RawSpdy.tunnel(sim, 'data', echoPod);
  assert.equal(sim.goAwaySpdySessions('data', echoPod), 1);
  await idle.until(() => idle.closed, 'a session without streams closes at once');
  assert.equal(idle.goAwayLastGood, 0);
});

test('plain SPDY: 101 with Connection/Upgrade/X-Stream-Protocol-Version; handshake errors in kubelet words', async () => {
  const raw = (await RawSpdy.plain(sim, 'data', echoPod)) as RawSpdy;
  assert.ok(raw instanceof RawSpdy);
  assert.equal(raw.upgradeHeaders?.upgrade, 'SPDY/3.1');
  assert.equal(raw.upgradeHeaders?.['x-stream-protocol-version'], 'portforward.k8s.io');
  const { data } = raw.pair(7000, 0);
  data.stream.write(Buffer.from('plain'));
  await raw.until(() => data.text === 'plain', 'echo');
  raw.close();
  const noVersion = (await RawSpdy.plain(sim, 'data', echoPod, { 'X-Stream-Protocol-Version': '' })) as RefusedUpgrade;
  assert.equal(noVersion.status, 500);
  assert.equal(noVersion.body, 'unable to upgrade: X-Stream-Protocol-Version is required\n');
  const wrong = (await RawSpdy.plain(sim, 'data', echoPod, { 'X-Stream-Protocol-Version': 'v9.portforward.k8s.io' })) as RefusedUpgrade;
  assert.equal(wrong.status, 403);
  assert.match(wrong.body, /unable to negotiate protocol: client supports \[v9\.portforward\.k8s\.io\], server accepts \[portforward\.k8s\.io\]/);
  const missing = (await RawSpdy.plain(sim, 'data', 'nope')) as RefusedUpgrade;
  assert.equal(missing.status, 404);
  assert.match(missing.body, /pods \\"nope\\" not found/);
});

test('tunnel off (1.29-like): the WebSocket reaches the v4 handler; plain SPDY still works', async () => {
  sim.setSpdyTunnel(false);
  try {
    await assert.rejects(RawSpdy.tunnel(sim, 'data', echoPod), (err: unknown) => {
      assert.ok(err instanceof TunnelRefusal);
      assert.equal(err.status, 400);
      assert.equal(err.body, 'query parameter "port" is required\n');
      return true;
    });
    const raw = (await RawSpdy.plain(sim, 'data', echoPod)) as RawSpdy;
    const { data } = raw.pair(7000, 0);
    data.stream.write(Buffer.from('old server'));
    await raw.until(() => data.text === 'old server', 'echo over plain SPDY');
    raw.close();
  } finally {
    sim.setSpdyTunnel(true);
  }
});

test('killing sessions, deleting the pod: the client sees the connection end', async () => {
  const raw = await RawSpdy.tunnel(sim, 'data', echoPod);
  const { data } = raw.pair(7000, 0);
  await raw.until(() => data.replied, 'reply');
  assert.equal(sim.killSpdySessions('data', echoPod), 1);
  await raw.until(() => raw.closed, 'session closed');
  await sim.createPod({ namespace: 'data', name: 'short-lived', ports: [{ containerPort: 9000, backend: 'echo' }] });
  const raw2 = await RawSpdy.tunnel(sim, 'data', 'short-lived');
  const first = raw2.pair(9000, 0);
  await raw2.until(() => first.data.replied, 'reply');
  await sim.deletePod('data', 'short-lived');
  // The pod's connection ends; the session outlives the pod, as a real kubelet's does, and
  // answers new pairs with containerd's words for a sandbox that is gone.
  await raw2.until(() => first.data.ended, 'the pod connection ended');
  const later = raw2.pair(9000, 1);
  await raw2.until(() => later.error.text.length > 0, 'error text');
  assert.match(later.error.text, /^error forwarding port 9000 to pod [0-9a-f]{64}, uid : failed to find sandbox "[0-9a-f]{64}" in store: not found$/);
  assert.equal(raw2.closed, false);
  raw2.close();
  await raw2.until(() => sim.openSpdySessions === 0, 'sessions gone once the client closed');
});
