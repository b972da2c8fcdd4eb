// Faults under open streams: each one ends only what it must, promptly, and the proxy goes on.
// (API server restarts and 410 relists: data-path.test.ts and cluster-access.test.ts.)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { Download, closedWithin, openStream, roundTrip, sendGet, type OpenStream } from '../helpers/streams.js';
import { SAMPLE } from '../sim/sample.js';

const BIG = 1 << 30;
const [webA, webB, webC] = SAMPLE.web.pods;
const helloFrom = (body: string) => /hello from (\S+) \(/.exec(body)?.[1];

let cluster: TestCluster;
let proxy: ProxyProcess;
let socks: string;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug']);
  socks = proxy.socks!;
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  const code = await proxy?.stop();
  await cluster?.close();
  assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

async function web(): Promise<string> {
  const r = await curl(['--proxy', `socks5h://${socks}`, 'http://web.shop:8080/']);
  assert.equal(r.code, 0, `curl web.shop: ${r.stderr}`);
  return helloFrom(r.stdout)!;
}

async function echoing(s: OpenStream, what: string): Promise<void> {
  const payload = randomBytes(4096);
  assert.ok((await roundTrip(s, payload)).equals(payload), `${what} still echoes`);
}

/** A raw download of GET /bytes/N straight from one pod (Pod IP, container port). */
async function download(pod: string, size: number, close = false): Promise<Download> {
  const s = await openStream(socks, cluster.sim.podIP('shop', pod), SAMPLE.web.containerPort);
  s.reader.detach();
  sendGet(s, `/bytes/${size}`, close);
  return new Download(s.socket);
}

describe('watches', () => {
  test('dropped watches: open streams keep flowing, the caches resume and see a new Service', async () => {
    const s = await openStream(socks, 'echo.data', 7000);
    await echoing(s, 'the stream opened before the drop');
    cluster.sim.resetCounters();
    cluster.sim.dropWatches();
    await echoing(s, 'the stream right after the drop');
    await eventually(async () => proxy.logs.some((l) => l.msg === 'watch ended by the API server; resuming'), 5_000, 50);
    await cluster.sim.createPod({ namespace: 'shop', name: 'after-drop-1', labels: { app: 'after-drop' }, ports: [{ containerPort: 8080 }] });
    await cluster.sim.createService({ namespace: 'shop', name: 'after-drop', selector: { app: 'after-drop' }, ports: [{ port: 80, targetPort: 8080 }] });
    const body = await eventually(
      async () => {
        const r = await curl(['--proxy', `socks5h://${socks}`, 'http://after-drop.shop/']);
        return r.code === 0 && r.stdout;
      },
      10_000,
      100,
    );
    assert.match(body, /hello from after-drop-1/);
    assert.ok(cluster.sim.counters.watch >= 3, `re-watched: ${JSON.stringify(cluster.sim.counters.byPath)}`);
    await echoing(s, 'the stream after the caches resumed');
    s.socket.destroy();
  });
});

/**
 * Every endpoint of `host` (port 80) now refuses, the last one having accepted lately: one stream
 * may still be called open before the refusal shows and must then close at once; the refusal is
 * noted, so the next stream waits for the dial and gets 0x05.
 */
async function refusedAfterAtMostOneOpen(host: string): Promise<void> {
  const first = await socks5Connect(socks, host, 80);
  if (first.reply === 0) await closedWithin(first.socket, 5_000, `a stream to ${host} no endpoint accepted`);
  else assert.equal(first.reply, 0x05);
  first.socket.destroy();
  const second = await socks5Connect(socks, host, 80);
  assert.equal(second.reply, 0x05, `${host}: connection refused once no endpoint is left`);
  second.socket.destroy();
}

describe('an API server over its share (API priority and fairness)', () => {
  test('a Pod IP looked up through 429s with Retry-After: the connection waits and works, as kubectl would', async () => {
    const ip = cluster.sim.podIP('shop', webC!);
    cluster.sim.tooManyRequests(2, /fieldSelector=status\.podIP/);
    const t0 = Date.now();
    const r = await curl(['-sS', '-x', `socks5h://${socks}`, `http://${ip}:${SAMPLE.web.containerPort}/`], 15_000);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(helloFrom(r.stdout), webC);
    assert.ok(Date.now() - t0 >= 1800, `waited the two Retry-Afters: ${Date.now() - t0} ms`);
  });
});

describe('a pod that refuses its port', () => {
  test('a warm pod that starts refusing: streams move to another endpoint, clients never notice', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 6; i++) seen.add(await web());
    assert.equal(seen.size, 3, 'all three pods served (and are trusted to accept)');
    const from = proxy.logs.length;
    cluster.sim.refusePort('shop', webA, SAMPLE.web.containerPort);
    try {
      for (let i = 0; i < 9; i++) assert.notEqual(await web(), webA);
      assert.ok(proxy.logs.some((l) => l.msg === 'pod refused after the stream opened; moved to another endpoint'));
      // Each moved stream's closing line names the pod that answered, not the one that refused.
      const lines = proxy.logs.slice(from);
      const moved = lines.filter((l) => l.msg === 'stream open' && String(l.via).includes(webA)).map((l) => l.stream);
      assert.ok(moved.length > 0, 'a stream was opened to the refusing pod first');
      await eventually(async () => moved.every((id) => proxy.logs.some((l) => l.stream === id && String(l.msg).startsWith('stream closed'))), 5_000, 50);
      for (const id of moved) {
        const closed = proxy.logs.find((l) => l.stream === id && String(l.msg).startsWith('stream closed'));
        assert.ok(closed && !String(closed.via).includes(webA), `stream ${id} closed via ${String(closed?.via)}`);
      }
    } finally {
      cluster.sim.refusePort('shop', webA, SAMPLE.web.containerPort, false);
    }
  });

  test('a pod refusing from the start is skipped; when every endpoint refuses the client gets 0x05', async () => {
    for (const name of ['flaky-1', 'flaky-2']) {
      await cluster.sim.createPod({ namespace: 'shop', name, labels: { app: 'flaky' }, ports: [{ containerPort: 9000 }] });
    }
    await cluster.sim.createService({ namespace: 'shop', name: 'flaky', selector: { app: 'flaky' }, ports: [{ port: 80, targetPort: 9000 }] });
    cluster.sim.refusePort('shop', 'flaky-1', 9000);
    for (let i = 0; i < 4; i++) {
      const r = await eventually(
        async () => {
          const got = await curl(['--proxy', `socks5h://${socks}`, 'http://flaky.shop/']);
          return got.code === 0 && got.stdout;
        },
        10_000,
        100,
      );
      assert.match(r, /hello from flaky-2/);
    }
    cluster.sim.refusePort('shop', 'flaky-2', 9000);
    // flaky-2 accepted a moment ago, so one stream may still be called open before its refusal
    // shows; it must then close at once. After that, every endpoint is known to refuse.
    await refusedAfterAtMostOneOpen('flaky.shop');
  });

  test('a single warm endpoint that starts refusing: at most one stream is called open and closes; then 0x05', async () => {
    await cluster.sim.createPod({ namespace: 'shop', name: 'solo-1', labels: { app: 'solo' }, ports: [{ containerPort: 9100 }] });
    await cluster.sim.createService({ namespace: 'shop', name: 'solo', selector: { app: 'solo' }, ports: [{ port: 80, targetPort: 9100 }] });
    const body = await eventually(
      async () => {
        const got = await curl(['--proxy', `socks5h://${socks}`, 'http://solo.shop/']);
        return got.code === 0 && got.stdout;
      },
      10_000,
      100,
    );
    assert.match(body, /hello from solo-1/, 'the port accepted: it is trusted to accept again');
    cluster.sim.refusePort('shop', 'solo-1', 9100);
    try {
      // No other endpoint, so no retry wrapper: the refusal must still be noted.
      await refusedAfterAtMostOneOpen('solo.shop');
    } finally {
      cluster.sim.refusePort('shop', 'solo-1', 9100, false);
    }
  });
});

describe('backends that reset or half-close', () => {
  test("a backend RST ends that pod's streams (bytes intact up to the reset); other streams go on", async () => {
    const other = await openStream(socks, 'echo.data', 7000);
    // One connection idle between keep-alive requests, one in the middle of a download.
    const idle = await openStream(socks, cluster.sim.podIP('shop', webB), SAMPLE.web.containerPort);
    sendGet(idle, '/');
    assert.match((await idle.reader.read(17)).toString(), /^HTTP\/1\.1 200 OK/);
    const d = await download(webB, BIG);
    await d.until(1 << 20);
    assert.ok(cluster.sim.resetPodConnections('shop', webB) >= 2);
    await closedWithin(idle.socket, 10_000, 'the idle stream whose backend reset');
    await closedWithin(d.socket, 10_000, 'the download whose backend reset');
    assert.ok(d.received < BIG && !d.corrupt, `received ${d.received} bytes, corrupt: ${d.corrupt}`);
    await echoing(other, 'an unrelated stream');
    other.socket.destroy();
    await eventually(async () => proxy.logs.some((l) => l.msg === 'pod connection ended with an error' && /reset by peer/.test(String(l.error))), 5_000, 50);
    assert.ok((await web()).startsWith('web-'));
  });

  test('a backend that resets after it answered: its client is reset, not ended as if the pod had closed', async () => {
    const s = await openStream(socks, cluster.sim.podIP('shop', webA), SAMPLE.web.containerPort);
    sendGet(s, '/');
    assert.match((await s.reader.read(17)).toString(), /^HTTP\/1\.1 200 OK/);
    let ended = false;
    let error: string | undefined;
    s.socket.on('end', () => (ended = true));
    s.socket.on('error', (err: NodeJS.ErrnoException) => (error = err.code));
    assert.ok(cluster.sim.resetPodConnections('shop', webA) >= 1);
    await closedWithin(s.socket, 10_000, 'the stream whose backend reset');
    // The kubelet sends the runtime's FIN on the data stream first, then why: "reset by peer".
    assert.equal(ended, false, 'no FIN: after a reset it would pass a cut-short answer for a whole one');
    assert.equal(error, 'ECONNRESET');
  });

  test('backend half-close: the whole response, then EOF', async () => {
    const size = 3 << 20;
    const d = await download(webC, size, true);
    await closedWithin(d.socket, 10_000, 'a Connection: close response');
    assert.equal(d.status, 200);
    assert.equal(d.received, size);
    assert.ok(!d.corrupt);
  });

  test('client half-close: everything sent is echoed back, then EOF', async () => {
    const s = await openStream(socks, 'echo.data', 7000);
    const payload = randomBytes(256 * 1024);
    s.socket.end(payload);
    const back = await s.reader.readAll();
    assert.ok(back.equals(payload), `echoed ${back.length} of ${payload.length} bytes`);
  });
});

describe('streams that end early', () => {
  test('a client cancelling a large download halfway ends only that stream and its tunnel', async () => {
    const other = await openStream(socks, 'echo.data', 7000);
    const tunnelsBefore = cluster.sim.openPortForwards;
    const big = await download(webA, BIG);
    const small = await download(webB, 8 << 20, true);
    await big.until(4 << 20);
    big.socket.destroy();
    await closedWithin(small.socket, 20_000, 'the parallel download');
    assert.equal(small.received, 8 << 20);
    assert.ok(!small.corrupt);
    await echoing(other, 'an unrelated stream');
    // The cancelled tunnel is torn down too, not left streaming into a dead socket.
    await eventually(async () => cluster.sim.openPortForwards <= tunnelsBefore, 10_000, 50);
    // …and logged as closed, with the bytes that did reach the client.
    await eventually(
      async () => proxy.logs.some((l) => String(l.msg).startsWith('stream closed') && String(l.via).includes(webA) && Number(l.bytesToClient) >= 4 << 20),
      5_000,
      50,
    );
    other.socket.destroy();
  });

  test('a pod deleted mid-download: that stream ends within seconds, new connections use the others', async () => {
    const d = await download(webC, BIG);
    await d.until(1 << 20);
    // The client stops reading, as a slow one would: the end must still reach it once it reads.
    d.socket.pause();
    await cluster.sim.deletePod('shop', webC);
    d.socket.resume();
    await closedWithin(d.socket, 10_000, 'the download from the deleted pod');
    assert.ok(d.received < BIG && !d.corrupt, `received ${d.received} bytes, corrupt: ${d.corrupt}`);
    for (let i = 0; i < 6; i++) assert.notEqual(await web(), webC);
    await cluster.sim.createPod({ namespace: 'shop', name: webC, labels: { app: 'web' }, ports: [{ name: 'http', containerPort: SAMPLE.web.containerPort }] });
  });
});
