// SpdyTransport in-process against the simulated cluster: the stream cap per tunnel opens more
// tunnels, unused tunnels close after the idle linger (GOAWAY), PING detects a silently dead path,
// and close() ends everything.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { createLogger } from '../../src/core/log.js';
import { SpdyTransport, type SpdyTransportOptions } from '../../src/tunnel/spdy-transport.js';
import type { PodPort } from '../../src/tunnel/transport.js';
import { FrameReader } from '../../src/tunnel/spdy/framer.js';
import { SAMPLE } from '../sim/sample.js';

let cluster: TestCluster;
let api: ApiConnection;
const echo: PodPort = { namespace: 'data', pod: SAMPLE.echo.pods[0], port: 7000 };

before(async () => {
  cluster = await startTestCluster();
  api = new ApiConnection(loadKubeConfig({ kubeconfig: cluster.kubeconfig }).kc);
});

after(async () => {
  await cluster?.close();
});

function transport(o: Partial<SpdyTransportOptions>): SpdyTransport {
  return new SpdyTransport(api, createLogger('silent'), { keepalive: { intervalMs: 0, timeoutMs: 0 }, ...o });
}

function open(t: SpdyTransport, target = echo): Promise<Duplex> {
  return t.open(target, { signal: AbortSignal.timeout(5000), confirmMs: 0 });
}

function roundTrip(s: Duplex, payload: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const got: Buffer[] = [];
    let n = 0;
    const onData = (d: Buffer) => {
      got.push(d);
      n += d.length;
      if (n >= payload.length) {
        s.off('data', onData);
        resolve(Buffer.concat(got));
      }
    };
    s.on('data', onData);
    s.once('error', reject);
    s.write(payload);
  });
}

test('past maxStreamsPerTunnel a second and third tunnel open; all streams work; close() sends GOAWAY on each', async () => {
  const t = transport({ maxStreamsPerTunnel: 2, idleMs: 60_000 });
  cluster.sim.resetCounters();
  const streams = await Promise.all(Array.from({ length: 5 }, () => open(t)));
  for (const [i, s] of streams.entries()) assert.equal((await roundTrip(s, Buffer.from(`s${i}`))).toString(), `s${i}`);
  assert.equal(cluster.sim.counters.portForward, 3);
  assert.deepEqual(t.stats(), [{ pod: `data/${echo.pod}`, transport: 'spdy', tunnels: 3, streams: 5 }]);
  assert.equal(t.openTunnels(), 3);
  for (const s of streams) s.destroy();
  await eventually(async () => t.stats()[0]?.streams === 0, 2000, 20);
  // Freed slots are reused: no new tunnel for the next stream.
  const again = await open(t);
  assert.equal((await roundTrip(again, randomBytes(10))).length, 10);
  assert.equal(cluster.sim.counters.portForward, 3);
  const goAways = cluster.sim.spdyGoAways;
  await t.close();
  await eventually(async () => cluster.sim.openSpdySessions === 0, 3000, 20);
  assert.equal(cluster.sim.spdyGoAways, goAways + 3, 'close() says GOAWAY on every tunnel');
  await assert.rejects(open(t), /shutting down/);
});

test('an unused tunnel closes after the idle linger, with GOAWAY', async () => {
  const t = transport({ idleMs: 150 });
  const s = await open(t);
  await roundTrip(s, Buffer.from('x'));
  assert.equal(cluster.sim.openSpdySessions, 1);
  const goAways = cluster.sim.spdyGoAways;
  s.end();
  await eventually(async () => cluster.sim.openSpdySessions === 0 && t.openTunnels() === 0, 5000, 20);
  assert.equal(cluster.sim.spdyGoAways, goAways + 1);
  await t.close();
});

test('a tunnel authorized longer ago than reauthorizeMs takes no new stream: the next opens a tunnel (RBAC asked again); the old one closes once unused', async () => {
  const t = transport({ idleMs: 60_000, reauthorizeMs: 200 });
  cluster.sim.resetCounters();
  const first = await open(t);
  assert.equal((await roundTrip(first, Buffer.from('a'))).toString(), 'a');
  const warm = await open(t);
  assert.equal((await roundTrip(warm, Buffer.from('b'))).toString(), 'b');
  assert.equal(cluster.sim.counters.portForward, 1, 'a young tunnel is shared');
  await new Promise((resolve) => setTimeout(resolve, 250));
  const later = await open(t);
  assert.equal((await roundTrip(later, Buffer.from('c'))).toString(), 'c');
  assert.equal(cluster.sim.counters.portForward, 2, 'an old one is not: a new upgrade, authorized anew');
  assert.equal((await roundTrip(first, Buffer.from('d'))).toString(), 'd', 'its own streams go on');
  first.destroy();
  warm.destroy();
  await eventually(async () => t.openTunnels() === 1, 2000, 20);
  later.destroy();
  await t.close();
});

test('a stream given up while its tunnel opens gives its place back: nothing counted, the tunnel idles out', async () => {
  const t = transport({ idleMs: 150 });
  await assert.rejects(t.open(echo, { signal: AbortSignal.abort(), confirmMs: 0 }), /did not open in time/);
  assert.deepEqual(t.stats(), [], 'a tunnel still opening is no tunnel yet');
  const s = await open(t);
  await roundTrip(s, Buffer.from('x'));
  assert.deepEqual(
    t.stats().map((p) => p.streams),
    [1],
  );
  s.end();
  await eventually(async () => t.openTunnels() === 0 && t.stats().length === 0, 5000, 20);
  await t.close();
});

test('a tunnel still dialling a hung kubelet is not counted: status shows no tunnel until one opens', async () => {
  const t = transport({ idleMs: 60_000 });
  cluster.sim.stallPortForwards(true);
  try {
    const gaveUp = new AbortController();
    const pending = t.open(echo, { signal: gaveUp.signal, confirmMs: 0 });
    pending.catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(t.stats(), [], 'no tunnel is open: the upgrade has no answer');
    assert.equal(t.openTunnels(), 0);
    gaveUp.abort();
  } finally {
    cluster.sim.stallPortForwards(false);
    await t.close();
  }
});

test('PING: a tunnel whose path went silent is dropped; the next stream opens a new one', async () => {
  const t = transport({ keepalive: { intervalMs: 100, timeoutMs: 300 }, idleMs: 60_000 });
  const s = await open(t);
  await roundTrip(s, Buffer.from('x'));
  let failed: Error | undefined;
  s.on('error', (err) => (failed = err));
  cluster.sim.resetCounters();
  assert.equal(cluster.sim.freezeSpdySessions('data', echo.pod), 1);
  await eventually(async () => failed !== undefined, 3000, 20);
  assert.match(String(failed), /broke: the tunnel stopped answering pings/);
  const fresh = await open(t);
  assert.equal((await roundTrip(fresh, Buffer.from('after'))).toString(), 'after');
  assert.equal(cluster.sim.counters.portForward, 1);
  await t.close();
  cluster.sim.killSpdySessions();
});

test('a stream opens in one tunnel message: SYN_STREAM error, its FIN, SYN_STREAM data — kubectl’s frames and order', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'spdy-capture-'));
  const capture = path.join(dir, 'client-bytes');
  process.env.SIM_SPDY_CAPTURE = capture;
  const t = transport({ idleMs: 60_000 });
  try {
    const s = await open(t);
    assert.equal((await roundTrip(s, Buffer.from('one message'))).toString(), 'one message');
    s.destroy();
  } finally {
    delete process.env.SIM_SPDY_CAPTURE;
    await t.close();
  }
  // One line per tunnel message the simulated API server relayed to the kubelet.
  const first = Buffer.from(readFileSync(capture, 'utf8').split('\n')[0]!, 'hex');
  rmSync(dir, { recursive: true, force: true });
  const reader = new FrameReader();
  reader.push(first);
  const frames = [];
  for (let f = reader.next(); f; f = reader.next()) frames.push(f);
  const [errorSyn, errorFin, dataSyn] = frames;
  assert.equal(errorSyn?.type, 'syn_stream');
  assert.equal(dataSyn?.type, 'syn_stream');
  assert.ok(errorSyn.type === 'syn_stream' && dataSyn.type === 'syn_stream');
  assert.deepEqual([errorSyn.streamId, dataSyn.streamId], [1, 3]);
  assert.deepEqual(
    errorFin,
    { type: 'data', streamId: 1, fin: true, data: Buffer.alloc(0), end: true },
    'the error stream is finished at once: we never write on it',
  );
});

/** A stream whose reader stops: the echo pod's answer to 4 MiB piles up until the stream holds its tunnel. */
async function heldStream(t: SpdyTransport): Promise<Duplex> {
  const slow = await open(t);
  slow.on('error', () => undefined);
  slow.pause();
  slow.write(Buffer.alloc(4 << 20, 0x61));
  await eventually(async () => t.stats().some((s) => s.tunnels > 0) && slow.readableLength >= 1 << 20, 5000, 20);
  // Held once the tunnel stops reading: nothing more arrives. A stream opened before that (a busy
  // machine) went on the tunnel about to be held, and waited behind the reader.
  let last = -1;
  await eventually(
    async () => {
      const now = slow.readableLength;
      const still = now === last;
      last = now;
      return still;
    },
    5000,
    200,
  );
  return slow;
}

test('a reader that stops holds its tunnel, not the pod: a new stream to that pod opens a tunnel of its own and is answered', async () => {
  const t = transport({ idleMs: 60_000 });
  const slow = await heldStream(t);
  cluster.sim.resetCounters();
  const fresh = await open(t);
  // A stream stuck behind the slow reader would never be answered: 10 s tells that from a busy machine.
  const answer = await Promise.race([roundTrip(fresh, Buffer.from('hello')), new Promise((r) => setTimeout(() => r('no echo within 10 s'), 10_000))]);
  assert.equal(String(answer), 'hello');
  assert.equal(cluster.sim.counters.portForward, 1, 'a second tunnel');
  // The slow reader catches up: every byte of its echo is there.
  let got = slow.readableLength;
  slow.on('data', (d: Buffer) => (got += d.length));
  slow.read(0);
  slow.resume();
  await eventually(async () => got >= 4 << 20, 10_000, 20);
  await t.close();
});

test('after a pause a tunnel held by a slow reader is not taken for dead (it cannot read a PING answer); one that goes silent fails its streams', async () => {
  const t = transport({ idleMs: 60_000 });
  const slow = await heldStream(t);
  t.afterPause(300);
  await new Promise((r) => setTimeout(r, 800));
  assert.equal(slow.destroyed, false, 'the held tunnel and its stream live on');
  let got = slow.readableLength;
  slow.on('data', (d: Buffer) => (got += d.length));
  slow.resume();
  await eventually(async () => got >= 4 << 20, 10_000, 20);
  // A busy tunnel whose path died while the process slept: its stream fails, it does not end as if done.
  const busy = await open(t);
  await roundTrip(busy, Buffer.from('x'));
  const outcome = new Promise<string>((resolve) => {
    busy.on('end', () => resolve('end'));
    busy.on('error', (err) => resolve(`error: ${err.message}`));
  });
  cluster.sim.freezeSpdySessions('data', echo.pod);
  t.afterPause(300);
  assert.match(await outcome, /^error: .*no answer to a PING after the process was paused/);
  await t.close();
  cluster.sim.killSpdySessions();
});

test('a pod that does not read an upload holds its tunnel, not the pod: a new stream to that pod opens a tunnel of its own and is answered', async () => {
  // A server that accepts and never reads: the kubelet blocks on it and reads no more of the session.
  const sockets: net.Socket[] = [];
  const deaf = net.createServer((s) => {
    s.pause();
    sockets.push(s);
  });
  await new Promise<void>((r) => deaf.listen(0, '127.0.0.1', r));
  const { port } = deaf.address() as net.AddressInfo;
  await cluster.sim.createPod({
    namespace: 'data',
    name: 'deaf-0',
    ports: [
      { containerPort: 7000, backend: 'echo' },
      { containerPort: 7001, backend: 'external', target: { host: '127.0.0.1', port } },
    ],
  });
  const t = transport({ idleMs: 60_000 });
  try {
    const upload = await open(t, { namespace: 'data', pod: 'deaf-0', port: 7001 });
    upload.on('error', () => undefined);
    // Write until the tunnel stops taking more: the pod, the kubelet and the tunnel are full.
    const chunk = Buffer.alloc(64 * 1024, 0x62);
    await new Promise<void>((resolve) => {
      let quiet: NodeJS.Timeout | undefined;
      const more = (): void => {
        clearTimeout(quiet);
        quiet = setTimeout(() => {
          upload.off('drain', more);
          resolve();
        }, 1500);
        while (upload.write(chunk));
        upload.once('drain', more);
      };
      more();
    });
    cluster.sim.resetCounters();
    const fresh = await open(t, { namespace: 'data', pod: 'deaf-0', port: 7000 });
    const answer = await Promise.race([roundTrip(fresh, Buffer.from('hello')), new Promise((r) => setTimeout(() => r('no echo within 10 s'), 10_000))]);
    assert.equal(String(answer), 'hello');
    assert.equal(cluster.sim.counters.portForward, 1, 'a second tunnel');
    upload.destroy();
    fresh.destroy();
  } finally {
    await t.close();
    for (const s of sockets) s.destroy();
    deaf.close();
  }
});
