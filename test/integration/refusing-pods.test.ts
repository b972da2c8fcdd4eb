// A ready endpoint whose port refuses, in every frame order a kubelet can send; pods deleted and
// created again under their name; both error-stream formats. The proxy keeps serving through all
// of it and clients never see the refusals. (Runs on the default transport; the -websocket file
// runs it again on per-stream WebSockets.)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, testTransport, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import type { SpdyFailureFrames } from '../sim/kubelet-spdy.js';
import type { KubeletErrorFormat } from '../sim/kubelet-portforward.js';

const ORDERS: SpdyFailureFrames[] = ['containerd', 'text-first', 'text-then-rst', 'rst-only'];
const FORMATS: KubeletErrorFormat[] = ['text', 'json'];
const helloFrom = (body: string) => /hello from (\S+) \(/.exec(body)?.[1];

let cluster: TestCluster;
let proxy: ProxyProcess;
let serial = 0;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug']);
});

after(async () => {
  cluster.sim.setSpdyFailureFrames('containerd');
  cluster.sim.setKubeletErrorFormat('text');
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  const code = await proxy?.stop();
  await cluster?.close();
  assert.equal(code, 0, `the proxy kept running and exits 0 on SIGTERM: ${proxy?.stderr().slice(-2000)}`);
});

/** A Service of three http pods in "shop"; returns its name and pod names. */
async function service(prefix: string): Promise<{ name: string; pods: string[] }> {
  const name = `${prefix}-${++serial}`;
  const pods = [0, 1, 2].map((i) => `${name}-${i}`);
  for (const pod of pods) {
    await cluster.sim.createPod({ namespace: 'shop', name: pod, labels: { app: name }, ports: [{ name: 'http', containerPort: 8080, backend: 'http' }] });
  }
  await cluster.sim.createService({ namespace: 'shop', name, selector: { app: name }, ports: [{ port: 80, targetPort: 8080 }] });
  await eventually(async () => (await get(name)).code === 0, 10_000, 50);
  return { name, pods };
}

function get(name: string) {
  return curl(['--proxy', `socks5h://${proxy.socks}`, `http://${name}.shop/`]);
}

/** n requests to the Service: every one must succeed; returns which pods answered. */
async function allSucceed(name: string, n: number, what: string): Promise<string[]> {
  const served: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await get(name);
    assert.equal(r.code, 0, `${what}: request ${i + 1} of ${n} failed: ${r.stderr}`);
    served.push(helloFrom(r.stdout)!);
  }
  return served;
}

function alive(): void {
  assert.equal(proxy.proc.exitCode, null, `the proxy is still running: ${proxy.stderr().slice(-3000)}`);
  assert.ok(!proxy.stderr().includes('Unhandled'), 'no unhandled error was printed');
}

describe('a ready endpoint whose port refuses', () => {
  for (const format of FORMATS) {
    for (const order of ORDERS) {
      test(`${order} frames, ${format} errors: warm and cold, 12 of 12 requests succeed`, async () => {
        cluster.sim.setSpdyFailureFrames(order);
        cluster.sim.setKubeletErrorFormat(format);
        // Warm: every pod served (and is trusted to accept), then one stops listening.
        const warm = await service('warm');
        assert.equal(new Set(await allSucceed(warm.name, 6, 'warming')).size, 3, 'all three pods served');
        cluster.sim.refusePort('shop', warm.pods[0]!, 8080);
        const served = await allSucceed(warm.name, 12, 'warm, one refusing');
        assert.ok(!served.includes(warm.pods[0]!), 'the refusing pod answered nothing');
        // Cold: one pod refuses from the start.
        const cold = await service('cold');
        cluster.sim.refusePort('shop', cold.pods[1]!, 8080);
        assert.ok(!(await allSucceed(cold.name, 12, 'cold, one refusing')).includes(cold.pods[1]!));
        alive();
      });
    }

    test(`a Pod IP whose port refuses is SOCKS 0x05 (${format} errors)`, async () => {
      cluster.sim.setKubeletErrorFormat(format);
      cluster.sim.setSpdyFailureFrames('containerd');
      // A pod never used before (a warm port is called connected without waiting for the dial).
      const name = `podip-${++serial}`;
      const { ip } = await cluster.sim.createPod({ namespace: 'shop', name, ports: [{ containerPort: 8080, backend: 'http' }] });
      cluster.sim.refusePort('shop', name, 8080);
      await eventually(
        async () => {
          const { reply, socket } = await socks5Connect(proxy.socks!, ip, 8080);
          socket.destroy();
          return reply !== 4; // 0x04 until the cache has the pod
        },
        5_000,
        50,
      );
      for (let i = 0; i < 3; i++) {
        const { reply, socket } = await socks5Connect(proxy.socks!, ip, 8080);
        socket.destroy();
        assert.equal(reply, 5, `attempt ${i + 1}: connection refused`);
      }
      alive();
    });
  }

  test('GOAWAY in place of the answer: clean failures, and the proxy goes on serving', async () => {
    cluster.sim.setSpdyFailureFrames('goaway');
    cluster.sim.setKubeletErrorFormat('text');
    const svc = await service('goaway');
    await allSucceed(svc.name, 6, 'warming');
    cluster.sim.refusePort('shop', svc.pods[0]!, 8080);
    let ok = 0;
    for (let i = 0; i < 12; i++) {
      const r = await get(svc.name);
      if (r.code === 0) ok++;
      // 55: the proxy closed the connection before curl had sent its request (a send error).
      else assert.ok([52, 55, 56, 97].includes(r.code), `a clean failure (empty reply / reset / SOCKS error), not a hang: curl ${r.code} ${r.stderr}`);
    }
    assert.ok(ok >= 8, `the two listening pods keep answering (${ok} of 12)`);
    cluster.sim.setSpdyFailureFrames('containerd');
    await allSucceed(svc.name, 12, 'after the GOAWAYs');
    alive();
  });
});

describe('a pod deleted and created again under its name', () => {
  test('new streams reach the new instance at once; the old tunnel is closed', async () => {
    cluster.sim.setSpdyFailureFrames('containerd');
    const svc = await service('sts');
    const [, second] = svc.pods;
    assert.equal(new Set(await allSucceed(svc.name, 6, 'warming')).size, 3);
    const goAwaysBefore = cluster.sim.spdyGoAways;
    await cluster.sim.deletePod('shop', second!);
    const { ip } = await cluster.sim.createPod({
      namespace: 'shop',
      name: second!,
      labels: { app: svc.name },
      ports: [{ name: 'http', containerPort: 8080, backend: 'http' }],
    });
    // The new instance is reachable by its Pod IP as soon as the cache has it, and by the Service.
    await eventually(async () => (await curl(['--proxy', `socks5h://${proxy.socks}`, `http://${ip}:8080/`])).code === 0, 5_000, 50);
    const served = await allSucceed(svc.name, 12, 'after the re-creation');
    assert.ok(served.includes(second!), `the new ${second} gets traffic: ${served.join(' ')}`);
    if (testTransport() !== 'websocket') {
      // Closed once a slice lists the new instance under the old one's name (cluster/pod-departures.ts):
      // around when the new pod gets traffic, so the GOAWAY may reach the server a moment later.
      await eventually(async () => cluster.sim.spdyGoAways > goAwaysBefore, 3_000, 50).catch(() => undefined);
      assert.ok(cluster.sim.spdyGoAways > goAwaysBefore, "the old instance's tunnel was closed with GOAWAY");
    }
    alive();
  });

  test('a session that outlived its pod ("sandbox not found") is retired and the stream moves', async () => {
    // A second proxy whose watches go silent: it never hears of the deletion, so only the
    // kubelet's answer can tell it the pod is gone.
    const svc = await service('stale');
    const p2 = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug']);
    try {
      const via = (n: number) => Promise.all(Array.from({ length: n }, () => curl(['--proxy', `socks5h://${p2.socks}`, `http://${svc.name}.shop/`])));
      assert.ok(
        (await via(6)).every((r) => r.code === 0),
        'warm',
      );
      cluster.sim.freezeWatches();
      await cluster.sim.deletePod('shop', svc.pods[2]!);
      await cluster.sim.createPod({
        namespace: 'shop',
        name: svc.pods[2]!,
        labels: { app: svc.name },
        ports: [{ name: 'http', containerPort: 8080, backend: 'http' }],
      });
      for (let i = 0; i < 12; i++) {
        const r = await curl(['--proxy', `socks5h://${p2.socks}`, `http://${svc.name}.shop/`]);
        assert.equal(r.code, 0, `request ${i + 1} after the re-creation: ${r.stderr}`);
      }
      if (testTransport() !== 'websocket') {
        assert.ok(
          p2.logs.some((l) => l.msg === 'closing the pod tunnel' && String(l.why).includes('sandbox')),
          'the stale tunnel was retired',
        );
      }
      assert.equal(p2.proc.exitCode, null);
    } finally {
      assert.equal(await p2.stop(), 0);
    }
  });
});
