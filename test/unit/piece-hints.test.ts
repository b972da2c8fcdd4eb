// The piece hints of a transport's stream (core/stream-pieces.ts UpstreamStream) must reach the
// relay through every wrapper on the data path, or the relay sends each piece of a SPDY frame in
// its own write and nothing says so. A stream carrying hints goes through each wrapper in turn —
// the retry wrapper, the cluster route's pod streams (with and without a second endpoint), the
// router and the stream limiter — and the relay must ask it for pieces and send a unit cut in two
// in one write.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { UpstreamStream } from '../../src/core/stream-pieces.js';
import { PiecedUpstream } from '../helpers/pieced-upstream.js';
import type { OpenRequest, OpenedStream } from '../../src/core/types.js';
import { createLogger } from '../../src/core/log.js';
import { startRelay } from '../../src/listeners/relay.js';
import { RetryBeforeFirstByte } from '../../src/routes/cluster/retry-stream.js';
import { PodStreams } from '../../src/routes/cluster/pod-streams.js';
import type { Resolver } from '../../src/routes/cluster/resolver.js';
import type { Transport } from '../../src/tunnel/transport.js';
import type { Route } from '../../src/routes/route.js';
import { Router } from '../../src/routing/router.js';
import { StreamLimiter } from '../../src/proxy/limits.js';
import { MULTI_YAML, fixedView, tableFromYaml } from '../helpers/routing-decisions.js';
import { RouteMatcher } from '../../src/routing/table.js';
import { spyWrites, withSocketPair } from '../helpers/socket-pair.js';

const log = createLogger('silent');

/** A transport's stream that gives hints; it records which chunks the reader asked about. */
class HintedStream extends PiecedUpstream {
  readonly asked: Buffer[] = [];
  override continuesAfter(chunk: Buffer): boolean {
    this.asked.push(chunk);
    return super.continuesAfter(chunk);
  }
}

/** A transport whose every open gives the next of `streams`. */
function transportOf(...streams: HintedStream[]): Transport {
  return {
    name: 'hinted',
    open: async () => streams.shift()!,
    openTunnels: () => 0,
    close: async () => {},
  };
}

const plan = (ports: number) => ({
  label: 'web.shop:80',
  candidates: Array.from({ length: ports }, (_, i) => ({ namespace: 'shop', pod: `web-${i}`, port: 8080 })),
});

const request = (): OpenRequest => ({
  destination: { type: 'domain', host: 'web.shop.prod', port: 80 },
  frontEnd: 'socks5',
  client: '127.0.0.1:1',
  signal: new AbortController().signal,
});

/** What each wrapper makes of the transport's stream: the stream the relay gets. */
const wrappers: Record<string, (inner: HintedStream) => Promise<UpstreamStream>> = {
  'no wrapper': async (inner) => inner,
  'the retry wrapper': async (inner) => new RetryBeforeFirstByte(inner, async () => undefined),
  'pod streams, one endpoint': async (inner) =>
    (await new PodStreams('prod', {} as Resolver, transportOf(inner), log, { confirmMs: 0 }).openPlan(plan(1), new AbortController().signal)).stream,
  'pod streams, two endpoints': async (inner) =>
    (await new PodStreams('prod', {} as Resolver, transportOf(inner), log, { confirmMs: 0 }).openPlan(plan(2), new AbortController().signal)).stream,
  'router and stream limiter': async (inner) => {
    const podStreams = new PodStreams('prod', {} as Resolver, transportOf(inner), log, { confirmMs: 0 });
    const route: Route = {
      name: 'prod',
      kind: 'cluster',
      start: async () => {},
      status: () => ({ name: 'prod', kind: 'cluster', state: 'ready' }),
      close: async () => {},
      open: (_request, _claim, signal): Promise<OpenedStream> => podStreams.openPlan(plan(2), signal),
    };
    const matcher = new RouteMatcher(tableFromYaml(MULTI_YAML, false), new Map([['prod', fixedView([], ['shop'])]]));
    const routes = new Map<string, Route>(matcher.snapshot().routes.map(({ name }) => [name, route]));
    const limiter = new StreamLimiter(new Router({ matcher, routes }, { connectTimeoutMs: 2000 }), 10);
    return (await limiter.open(request())).stream;
  },
};

for (const [name, wrap] of Object.entries(wrappers)) {
  test(`piece hints reach the relay through ${name}`, { timeout: 10_000 }, async () => {
    await withSocketPair(async ({ inner: client }) => {
      const transportStream = new HintedStream();
      const upstream = await wrap(transportStream);
      const writes = spyWrites(client);
      startRelay(client, { stream: upstream }, undefined, log, () => {});
      assert.equal(transportStream.piecesAsked, true, 'the relay asked the transport stream for pieces');
      const first = Buffer.from('first half,');
      const last = Buffer.from(' second half');
      transportStream.piece(first, true);
      transportStream.piece(last, false);
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(transportStream.asked, [first, last], 'the relay asked about each piece');
      const carrying = writes.filter((w) => w.some((b) => b === first || b === last));
      assert.equal(carrying.length, 1, 'one write carried the unit');
      assert.deepEqual(carrying[0], [first, last], 'the pieces went out as they came, not copied');
    });
  });
}
