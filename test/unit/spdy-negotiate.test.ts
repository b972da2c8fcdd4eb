// Transport negotiation (auto | spdy | websocket) with stand-in transports — which one carries
// each stream, as its record says — and the error-stream text → typed error mapping of the SPDY
// transport.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough, type Duplex } from 'node:stream';
import { ConnectionRefusedError, ConnectTimeoutError, HostUnreachableError, PortForwardForbiddenError } from '../../src/core/errors.js';
import { NegotiatingTransport, type TransportMode } from '../../src/tunnel/negotiate.js';
import { TunnelRefusal } from '../../src/tunnel/spdy/tunnel.js';
import { dialError, errorStreamMessage, upgradeForbidden } from '../../src/tunnel/pod-stream.js';
import type { OpenOptions, PodPort, Transport } from '../../src/tunnel/transport.js';
import type { SpdyTransport } from '../../src/tunnel/spdy-transport.js';
import { createLogger } from '../../src/core/log.js';
import { PodStreams } from '../../src/routes/cluster/pod-streams.js';
import type { Plan } from '../../src/routes/cluster/resolver.js';

const target: PodPort = { namespace: 'shop', pod: 'web-0', port: 8080 };
const opts = (): OpenOptions => ({ signal: new AbortController().signal, confirmMs: 0 });

class Fake implements Transport {
  calls = 0;
  constructor(
    readonly name: string,
    private readonly behave: () => Duplex,
  ) {}
  async open(): Promise<Duplex> {
    this.calls++;
    return this.behave();
  }
  openTunnels(): number {
    return 0;
  }
  stats() {
    return [];
  }
  async close(): Promise<void> {}
}

function setup(mode: TransportMode, spdyFails?: () => Error | undefined) {
  const spdy = new Fake('spdy', () => {
    const err = spdyFails?.();
    if (err) throw err;
    return new PassThrough();
  });
  const v4 = new Fake('websocket', () => new PassThrough());
  const t = new NegotiatingTransport(mode, spdy as unknown as SpdyTransport, v4, createLogger('silent'), 'sim');
  return { t, spdy, v4 };
}

const refused = (status: number, body = '') => new HostUnreachableError('refused', { cause: new TunnelRefusal(status, body) });

test('which tunnel refusals are remembered for the cluster', () => {
  assert.equal(new TunnelRefusal(400, 'query parameter "port" is required').meansNoTunnel, true);
  assert.equal(new TunnelRefusal(101, '', 'v4.channel.k8s.io').meansNoTunnel, true);
  assert.equal(new TunnelRefusal(405, '').meansNoTunnel, true);
  for (const s of [401, 403, 404, 429, 500, 502, 503]) assert.equal(new TunnelRefusal(s, '').meansNoTunnel, false, String(s));
  // kube-apiserver v1.37.2's answer (test/integration/sim-conformance.test.ts) for a pod no node has taken yet.
  const unscheduled = JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'pod db-0 does not have a host assigned',
    reason: 'BadRequest',
    code: 400,
  });
  assert.equal(new TunnelRefusal(400, unscheduled).meansNoTunnel, false);
  // The kubelet's v4 handler (a server without the tunnel) answers in plain text, Go's trailing newline included.
  assert.equal(new TunnelRefusal(400, 'query parameter "port" is required\n').meansNoTunnel, true);
});

test('auto: a remembered refusal is asked again after 10 min; a cluster upgraded meanwhile gets its tunnel back', async (t) => {
  t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
  let upgraded = false;
  const { t: auto, spdy, v4 } = setup('auto', () => (upgraded ? undefined : refused(400, 'query parameter "port" is required')));
  (await auto.open(target, opts())).destroy();
  t.mock.timers.tick(9 * 60_000);
  (await auto.open(target, opts())).destroy();
  assert.deepEqual([spdy.calls, v4.calls], [1, 2], 'still remembered within 10 min');
  t.mock.timers.tick(60_000);
  (await auto.open(target, opts())).destroy();
  assert.deepEqual([spdy.calls, v4.calls], [2, 3], 'one stream asks again, and falls back while there is still no tunnel');
  (await auto.open(target, opts())).destroy();
  assert.deepEqual([spdy.calls, v4.calls], [2, 4], 'the new answer is remembered for another 10 min');
  upgraded = true;
  t.mock.timers.tick(10 * 60_000);
  (await auto.open(target, opts())).destroy();
  (await auto.open(target, opts())).destroy();
  assert.deepEqual([spdy.calls, v4.calls], [4, 4], 'the tunnel again, for every stream');
  assert.equal(auto.name, 'spdy');
});

test('auto: a 1.29-like refusal falls back to v4 and is remembered; SPDY is not asked again', async () => {
  const { t, spdy, v4 } = setup('auto', () => refused(400, 'query parameter "port" is required'));
  assert.equal(t.name, 'spdy');
  for (let i = 0; i < 3; i++) (await t.open(target, opts())).destroy();
  assert.equal(spdy.calls, 1);
  assert.equal(v4.calls, 3);
  assert.equal(t.name, 'websocket');
});

test('auto: a vanished pod (404) or a 5xx falls back for that stream only', async () => {
  const { t, spdy, v4 } = setup('auto', () => refused(404));
  const s = await t.open(target, opts());
  assert.deepEqual(t.stats(), [{ pod: 'shop/web-0', transport: 'websocket', tunnels: 1, streams: 1 }]);
  s.destroy();
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(t.stats(), []);
  await t.open(target, opts());
  assert.equal(spdy.calls, 2, 'asked again');
  assert.equal(v4.calls, 2);
});

test('auto: each stream is recorded with the transport that carries it, a lone fallback too', async () => {
  let refuse = true;
  const { t } = setup('auto', () => (refuse ? refused(404) : undefined));
  const fellBack = await t.open(target, opts());
  assert.equal(t.carrierOf(fellBack), 'websocket', 'a stream that fell back alone');
  assert.equal(t.name, 'spdy', 'the cluster still uses SPDY');
  refuse = false;
  assert.equal(t.carrierOf(await t.open(target, opts())), 'spdy');
  const streams = new PodStreams('prod', undefined as never, t, createLogger('silent'), { confirmMs: 0 });
  refuse = true;
  const plan: Plan = { label: 'service shop/web:8080', candidates: [target] };
  const opened = await streams.openPlan(plan, new AbortController().signal);
  assert.equal(opened.transport, 'websocket', 'the stream record names the transport used, not the cluster’s');
  opened.stream.destroy();
});

test('auto: errors that are not refusals (dial refused, API down) are not hidden by a fallback', async () => {
  const { t, v4 } = setup('auto', () => new ConnectionRefusedError('pod shop/web-0:8080: connection refused', { retryable: true }));
  await assert.rejects(t.open(target, opts()), ConnectionRefusedError);
  assert.equal(v4.calls, 0);
});

test('spdy and websocket modes use only their transport', async () => {
  const forced = setup('spdy', () => refused(400));
  await assert.rejects(forced.t.open(target, opts()), HostUnreachableError);
  assert.equal(forced.v4.calls, 0);
  const ws = setup('websocket');
  await ws.t.open(target, opts());
  assert.equal(ws.spdy.calls, 0);
  assert.equal(ws.t.name, 'websocket');
});

test('error-stream text maps like the v4 error channel; JSON from newer kubelets is unwrapped', () => {
  const text =
    'error forwarding port 8080 to pod abc, uid : failed to execute portforward in network namespace "/var/run/netns/x": failed to connect to localhost:8080 inside namespace "abc", IPv4: dial tcp4 127.0.0.1:8080: connect: connection refused ';
  const e = dialError(target, text);
  assert.ok(e instanceof ConnectionRefusedError);
  assert.equal(e.retryable, true);
  assert.match(e.message, /^pod shop\/web-0:8080: error forwarding port 8080/);
  assert.ok(dialError(target, '(conn=&{0xc0 [] {0 0} 0xc1}, request=3) timed out waiting for streams') instanceof ConnectTimeoutError);
  assert.equal(
    errorStreamMessage(`${JSON.stringify({ closeConnection: true, message: 'error forwarding port 8080 to pod abc, uid : boom' })}\n`),
    'error forwarding port 8080 to pod abc, uid : boom',
  );
  assert.equal(errorStreamMessage('{not json'), '{not json');
});

test('a port-forward RBAC refuses: no per-stream WebSocket tried, and the pod refused from memory a few seconds (no 403 per connection)', async () => {
  const forbidden = () =>
    upgradeForbidden('port-forward tunnel to shop/web-0 refused by the API server (403): pods "web-0" is forbidden: ', target, new TunnelRefusal(403, ''));
  for (const mode of ['auto', 'spdy'] as const) {
    const { t, spdy, v4 } = setup(mode, forbidden);
    for (let i = 0; i < 5; i++) await assert.rejects(t.open(target, opts()), PortForwardForbiddenError);
    assert.equal(spdy.calls + v4.calls, 1, `${mode}: one upgrade refused answers the next streams`);
    // Another pod is asked for itself (a Role's resourceNames may allow it).
    await assert.rejects(t.open({ ...target, pod: 'web-1' }, opts()), PortForwardForbiddenError);
    assert.equal(spdy.calls + v4.calls, 2, mode);
  }
});

test('a burst of per-stream WebSockets to a pod RBAC refuses: one upgrade, the others answered by its 403', async () => {
  const { t, v4 } = setup('websocket');
  let answer: () => Duplex = () => {
    throw upgradeForbidden('port-forward to shop/web-0:8080 refused by the API server (403): pods "web-0" is forbidden: ', target, new TunnelRefusal(403, ''));
  };
  (v4 as unknown as { behave: () => Duplex }).behave = () => answer();
  const burst = await Promise.allSettled(Array.from({ length: 20 }, () => t.open(target, opts())));
  assert.ok(burst.every((r) => r.status === 'rejected' && r.reason instanceof PortForwardForbiddenError));
  assert.equal(v4.calls, 1, 'upgrades sent for 20 streams at once');
  // Allowed: a burst to a pod with no stream open waits for the first answer only, then each opens its own.
  answer = () => new PassThrough();
  const other = { ...target, pod: 'web-1' };
  const opened = await Promise.all(Array.from({ length: 5 }, () => t.open(other, opts())));
  assert.equal(opened.length, 5);
  assert.equal(v4.calls, 6);
  // Allowed lately: a later burst, its streams all closed meanwhile, opens at once.
  for (const s of opened) s.destroy();
  await new Promise((r) => setImmediate(r));
  const later = Array.from({ length: 5 }, () => t.open(other, opts()));
  assert.equal(v4.calls, 11, 'upgrades sent at once to a pod allowed lately');
  await Promise.all(later);
});
