// Keepalive on port-forward tunnels (--keepalive, --keepalive-timeout). The plugin reaches the
// simulated API server through a relay that can turn every open connection into a black hole,
// so a dead peer is produced on demand instead of waited for.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { startFreezableProxy, type FreezableProxy } from '../helpers/freezable-proxy.js';
import { openStream, roundTrip, sendGet, closedWithin, sleep } from '../helpers/streams.js';
import { deterministicSha256 } from '../sim/cluster.js';

const INTERVAL_MS = 300;
const TIMEOUT_MS = 1000;

let cluster: TestCluster;
let relay: FreezableProxy;
let proxy: ProxyProcess;

before(async () => {
  cluster = await startTestCluster();
  relay = await startFreezableProxy(Number(new URL(cluster.sim.server).port));
  const kubeconfig = path.join(cluster.dir, 'kc-relay');
  await writeFile(kubeconfig, cluster.sim.kubeconfigYaml({ server: relay.url, namespace: 'shop' }), { mode: 0o600 });
  proxy = await startProxyProcess([
    '--kubeconfig',
    kubeconfig,
    '--listen-socks',
    '127.0.0.1:0',
    '--log-level',
    'debug',
    '--keepalive',
    `${INTERVAL_MS}ms`,
    '--keepalive-timeout',
    `${TIMEOUT_MS}ms`,
  ]);
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  const code = await proxy?.stop();
  await relay?.close();
  await cluster?.close();
  assert.equal(code, 0);
});

test('an idle stream answered by pings stays open well past the keepalive timeout', async () => {
  const s = await openStream(proxy.socks!, 'echo.data', 7000);
  assert.equal((await roundTrip(s, Buffer.from('before\n'))).toString(), 'before\n');
  await sleep(3 * TIMEOUT_MS);
  assert.equal((await roundTrip(s, Buffer.from('after\n'))).toString(), 'after\n');
  s.socket.destroy();
});

test('a client that stops reading for longer than the timeout is not taken for a dead peer', async () => {
  const size = 64 << 20;
  const s = await openStream(proxy.socks!, 'web.shop', 8080);
  s.reader.detach();
  sendGet(s, `/bytes/${size}`);
  // Let the pipeline fill, then hold everything still: the proxy pauses its WebSocket reads.
  await sleep(200);
  s.socket.pause();
  await sleep(3 * TIMEOUT_MS);
  const hash = createHash('sha256');
  let body = -1;
  let head = Buffer.alloc(0);
  await new Promise<void>((resolve, reject) => {
    s.socket.on('data', (chunk: Buffer) => {
      if (body < 0) {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) return;
        chunk = head.subarray(end + 4);
        body = 0;
      }
      hash.update(chunk);
      body += chunk.length;
      if (body >= size) resolve();
    });
    s.socket.once('close', () => reject(new Error(`closed after ${body} of ${size} body bytes`)));
    s.socket.resume();
  });
  assert.equal(hash.digest('hex'), deterministicSha256(size));
  s.socket.destroy();
});

test('a tunnel whose peer went silent is closed, with its client, within interval + timeout', async () => {
  const s = await openStream(proxy.socks!, 'echo.data', 7000);
  assert.equal((await roundTrip(s, Buffer.from('alive\n'))).toString(), 'alive\n');
  const frozen = relay.freeze();
  assert.ok(frozen >= 1);
  const started = Date.now();
  // Bound: one interval to send the ping, the timeout, and generous slack for a busy machine.
  await closedWithin(s.socket, 10_000, 'the client connection of the dead tunnel');
  const tookMs = Date.now() - started;
  await eventually(async () => relay.frozenClosedByClient >= 1, 5_000, 50);
  // Every tunnel through the relay froze (an idle SPDY tunnel to a web pod may still linger too): the echo pod's must be among the dead.
  const dead = await eventually(
    async () => proxy.logs.find((l) => String(l.msg).includes('stopped answering pings') && /^data\/echo-/.test(String(l.target))),
    5_000,
    50,
  );
  assert.ok(dead);
  assert.ok(tookMs >= TIMEOUT_MS - 50, `closed after ${tookMs} ms, before the timeout could have run out`);
  // New connections are not frozen: the proxy carries on with fresh tunnels.
  const next = await openStream(proxy.socks!, 'echo.data', 7000);
  assert.equal((await roundTrip(next, Buffer.from('next\n'))).toString(), 'next\n');
  next.socket.destroy();
});
