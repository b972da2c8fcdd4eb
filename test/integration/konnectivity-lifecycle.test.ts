// A konnectivity route starts, waits and retries as a cluster route does (src/routes/guest-cluster/lifecycle.ts):
// its guest API server down at start is tried again until it answers, and then the route serves
// without a restart; a stream opened while it starts or syncs waits for it (the connect timeout
// running out is a timeout, SOCKS 0x06); close() during a retry stops the attempt, so nothing is
// restarted — for a cluster route too. The guest is the simulated cluster behind a TCP gate (down,
// slow, up), its pod network reachable only through the simulated konnectivity server.
import assert from 'node:assert/strict';
import path from 'node:path';
import os from 'node:os';
import { after, before, describe, it } from 'node:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { SimCluster } from '../sim/cluster.js';
import { SAMPLE, seedSampleCluster } from '../sim/sample.js';
import { SimGuestNetwork } from '../sim/guest-network.js';
import { SimKonnectivityServer } from '../sim/konnectivity-server.js';
import { eventually } from '../helpers/cluster.js';
import { startTcpGate, type TcpGate } from '../helpers/tcp-gate.js';
import { parseConfig } from '../../src/config/validate.js';
import { tableFrom } from '../../src/config/load.js';
import { RouteMatcher } from '../../src/routing/table.js';
import type { Route } from '../../src/routes/route.js';
import { KonnectivityRoute } from '../../src/routes/konnectivity/route.js';
import { ClusterRoute } from '../../src/routes/cluster/route.js';
import { DEFAULT_KEEPALIVE } from '../../src/tunnel/keepalive.js';
import { createLogger } from '../../src/core/log.js';
import { httpGet } from '../helpers/streams.js';
import { ConnectTimeoutError, RouteUnavailableError, SocksReply, replyFor } from '../../src/core/errors.js';
import type { OpenedStream } from '../../src/core/types.js';

const log = createLogger('silent');
// The first retry 0.5 s after a failure, not the product's 5 s (routes/guest-cluster/lifecycle.ts RetryTiming, a test
// hook): what is tested is that the route retries and what a retry does, not how long it waits.
const retry = { retryMinMs: 500 };

let sim: SimCluster;
let server: SimKonnectivityServer;
let gate: TcpGate;
let dir: string;
let kubeconfig: string;

before(async () => {
  sim = await SimCluster.start({ quiet: true, isolatePodIps: true });
  await seedSampleCluster(sim);
  dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-konn-life-'));
  server = await SimKonnectivityServer.start({ mode: 'grpc', network: new SimGuestNetwork(sim), uds: path.join(dir, 'konnectivity.sock') });
  const api = new URL(sim.server);
  gate = await startTcpGate({ host: api.hostname, port: Number(api.port) });
  kubeconfig = path.join(dir, 'kubeconfig');
  await sim.writeKubeconfig(kubeconfig, { namespace: 'shop', context: 'guest', server: gate.url });
});
after(async () => {
  sim.stallWatches(false);
  await gate.close();
  await server.stop();
  await sim.stop();
  await rm(dir, { recursive: true, force: true });
});

function tableOf(kind: 'konnectivity' | 'cluster') {
  const lines = ['routes:', '  - name: guest', `    kind: ${kind}`, '    default: true'];
  if (kind === 'konnectivity') lines.push('    konnectivity:', `      server: "${server.address}"`, '      mode: grpc');
  const table = tableFrom(parseConfig(`${lines.join('\n')}\n`, 'config.yaml', 'cluster.local'), { contexts: [], clusterDomain: 'cluster.local' });
  return { table, spec: table.routes[0]! };
}

function konnectivityRoute() {
  const { table, spec } = tableOf('konnectivity');
  assert.ok(spec.kind === 'konnectivity');
  const route = new KonnectivityRoute(spec, { kubeconfig, allowHostNetworkPods: false, retry, probeIntervalMs: 200 }, log);
  return { route, matcher: new RouteMatcher(table, new Map([['guest', route.guest]])) };
}

function clusterRoute() {
  const { table, spec } = tableOf('cluster');
  assert.ok(spec.kind === 'cluster');
  const route = new ClusterRoute(
    spec,
    {
      kubeconfig,
      clusterDomain: 'cluster.local',
      transport: 'auto',
      keepalive: DEFAULT_KEEPALIVE,
      connectTimeoutMs: 10_000,
      allowHostNetworkPods: false,
      retry,
    },
    log,
  );
  return { route, matcher: new RouteMatcher(table, new Map([['guest', route.guest]])) };
}

function open(route: Route, matcher: RouteMatcher, signal: AbortSignal = AbortSignal.timeout(10_000)): Promise<OpenedStream> {
  const destination = { host: 'web.shop.guest', port: SAMPLE.web.servicePort, type: 'domain' as const };
  const claim = matcher.match(destination);
  assert.ok(claim.claimed);
  return route.open({ destination, frontEnd: 'socks5', client: 'test', signal }, claim, signal);
}

async function assertServes(route: Route, matcher: RouteMatcher): Promise<void> {
  const opened = await open(route, matcher);
  assert.match(opened.via, /^konnectivity unix:\/\//);
  assert.match(await httpGet(opened.stream, '/'), /hello from web-[a-z0-9-]+ \(shop\) port 8081/);
  opened.stream.destroy();
}

describe('a konnectivity route', () => {
  it('whose guest API server is down at start tries again, and serves once it answers, without a restart', async () => {
    gate.set('reset');
    const { route, matcher } = konnectivityRoute();
    try {
      await assert.rejects(route.start(), /cannot reach the API server/);
      assert.equal(route.status().state, 'error');
      // In error: a stream fails at once (0x04), naming the route and why.
      const t0 = Date.now();
      const err = await open(route, matcher).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof RouteUnavailableError, String(err));
      assert.equal(replyFor(err).socks, SocksReply.hostUnreachable);
      assert.match(err.message, /konnectivity route guest is not available: cannot reach the API server/);
      assert.ok(Date.now() - t0 < 1_000, 'at once');
      gate.set('pass');
      // Retried after the failure (0.5 s, then 1 s, … with the test's retry hook).
      await eventually(async () => route.status().state === 'ready', 15_000, 100);
      assert.equal(route.status().reason, undefined);
      await assertServes(route, matcher);
    } finally {
      await route.close();
    }
  });

  it('whose konnectivity server has no agent shows degraded with its answer, and ready again once it serves, with no client dialling', async () => {
    gate.set('pass');
    const { route, matcher } = konnectivityRoute();
    try {
      await route.start();
      assert.equal(route.status().state, 'ready');
      server.noAgent = true;
      await assert.rejects(open(route, matcher), /no agent/);
      const status = route.status();
      assert.equal(status.state, 'degraded', 'the guest API answers, but every stream fails');
      assert.match(status.reason ?? '', /the konnectivity server has no agent to dial .*No agent available/);
      server.noAgent = false;
      // Its probe of the guest's kubernetes Service sees the server serve again.
      await eventually(async () => route.status().state === 'ready', 5_000, 50);
      assert.equal(route.status().reason, undefined);
      await assertServes(route, matcher);
    } finally {
      server.noAgent = false;
      await route.close();
    }
  });

  it('whose guest API server goes away after start shows degraded, still serves through the konnectivity server, and is ready again on its return', async () => {
    gate.set('pass');
    const { route, matcher } = konnectivityRoute();
    let bringUp!: () => void;
    let down: Promise<void> | undefined;
    try {
      await route.start();
      assert.equal(route.status().state, 'ready');
      const stoppedAt = Date.now();
      down = sim.restartApiServer(new Promise<void>((r) => (bringUp = r)));
      await eventually(async () => route.status().state === 'degraded', 8_000, 100);
      assert.ok(Date.now() - stoppedAt <= 5_000, `degraded after ${Date.now() - stoppedAt} ms`);
      assert.match(route.status().reason ?? '', /^the API server https:\/\/127\.0\.0\.1:\d+ does not answer/);
      // Names come from the cache; the stream itself goes through the konnectivity server.
      await assertServes(route, matcher);
      bringUp();
      await down;
      await eventually(async () => route.status().state === 'ready', 8_000, 100);
    } finally {
      bringUp?.();
      await down;
      await route.close();
    }
  });

  it('waits for its start with a stream opened meanwhile, then serves it', async () => {
    gate.set('hold');
    const { route, matcher } = konnectivityRoute();
    try {
      const started = route.start();
      await eventually(async () => gate.connections > 0 && route.status().state === 'starting', 5_000, 20);
      let settled = false;
      const opening = open(route, matcher).finally(() => (settled = true));
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(settled, false, 'the stream waits while the route starts');
      gate.set('pass');
      await started;
      const opened = await opening;
      assert.match(await httpGet(opened.stream, '/'), /hello from web-[a-z0-9-]+ \(shop\) port 8081/);
      opened.stream.destroy();
    } finally {
      gate.set('pass');
      await route.close();
    }
  });

  it('still syncing when the connect timeout runs out: a timeout (0x06) that says so', async () => {
    gate.set('pass');
    sim.stallWatches(true);
    const { route, matcher } = konnectivityRoute();
    try {
      const started = route.start().then(
        () => 'ready',
        (e: unknown) => e,
      );
      await eventually(async () => route.status().state === 'syncing', 10_000, 20);
      const t0 = Date.now();
      const err = await open(route, matcher, AbortSignal.timeout(500)).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(Date.now() - t0 >= 450, 'it waited for the connect timeout');
      assert.ok(err instanceof ConnectTimeoutError, String(err));
      assert.equal(replyFor(err).socks, SocksReply.ttlExpired);
      assert.match(err.message, /konnectivity route guest is still syncing its cache/);
      await route.close();
      assert.ok((await started) instanceof Error, 'closed before it synced');
    } finally {
      sim.stallWatches(false);
      await route.close();
    }
  });
});

for (const kind of ['konnectivity', 'cluster'] as const) {
  describe(`a ${kind} route closed while it tries again`, () => {
    it('stops that attempt: it neither watches nor becomes ready afterwards', async () => {
      gate.set('reset');
      const { route } = kind === 'konnectivity' ? konnectivityRoute() : clusterRoute();
      try {
        await assert.rejects(route.start(), /cannot reach the API server/);
        const failed = gate.connections;
        gate.set('hold');
        // The retry (0.5 s later) is held reaching the API server; then the route is closed (a reload).
        await eventually(async () => gate.connections > failed, 10_000, 50);
        await route.close();
        sim.resetCounters();
        gate.set('pass');
        await new Promise((r) => setTimeout(r, 1_500));
        assert.equal(sim.counters.list + sim.counters.watch, 0, `no watch was started after close(): ${JSON.stringify(sim.counters.byPath)}`);
        assert.notEqual(route.status().state, 'ready');
      } finally {
        gate.set('pass');
        await route.close();
      }
    });
  });
}
