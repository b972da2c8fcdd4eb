// The live feed (ui/feed.ts) and its ring: bounded memory whatever the traffic, a snapshot then
// batched events with the pod and transport of each stream, refusals with their reason, samples
// as deltas, and the routes sent when a state changes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger } from '../../src/core/log.js';
import { NotAllowedError } from '../../src/core/errors.js';
import { StreamStats } from '../../src/listeners/stream-stats.js';
import type { RouteStatus } from '../../src/routes/route.js';
import { LiveFeed, MAX_PENDING, RECENT_STREAMS, type FeedMessage } from '../../src/ui/feed.js';
import { Ring } from '../../src/ui/ring.js';

test('a ring keeps the last items in order and never more than its capacity', () => {
  const ring = new Ring<number>(3);
  assert.deepEqual(ring.toArray(), []);
  ring.push(1);
  ring.push(2);
  assert.deepEqual(ring.toArray(), [1, 2]);
  for (let i = 3; i <= 10; i++) ring.push(i);
  assert.deepEqual(ring.toArray(), [8, 9, 10]);
  assert.equal(ring.size, 3);
  assert.throws(() => new Ring(0), RangeError);
});

function setUp() {
  const stats = new StreamStats(createLogger('silent'));
  let routes: RouteStatus[] = [{ name: 'prod', kind: 'cluster', state: 'ready' }];
  const feed = new LiveFeed({
    proxy: () => ({ pid: 1, startedAt: new Date(0).toISOString(), context: 'prod', namespace: 'shop', auth: false }),
    routes: () => routes,
    totals: () => stats.snapshot(),
    openRecords: () => stats.openRecords(),
  });
  stats.observer = feed;
  const messages: FeedMessage[] = [];
  return { stats, feed, messages, setRoutes: (r: RouteStatus[]) => (routes = r), watch: () => feed.subscribe((m) => messages.push(m)) };
}

const destination = { host: 'web.shop.svc', port: 80, type: 'domain' as const };

test('a watcher gets the snapshot, then each stream with its pod and transport, and each refusal with its reason', () => {
  const { stats, feed, messages, watch } = setUp();
  const earlier = stats.opened('socks5', '127.0.0.1:5000', destination, 'shop/web-1:8080', 'prod', 'spdy');
  stats.closed(earlier, 10, 20);
  const stop = watch();
  try {
    const snapshot = messages[0];
    assert.equal(snapshot?.type, 'snapshot');
    assert.equal(snapshot.type === 'snapshot' && snapshot.recent[0]?.via, 'shop/web-1:8080', 'a stream closed before the page opened is in the snapshot');
    assert.deepEqual(snapshot.type === 'snapshot' && snapshot.routes.map((r) => r.name), ['prod']);
    const record = stats.opened('http-connect', '127.0.0.1:5001', destination, 'shop/web-2:8080', 'prod', 'websocket');
    stats.failed('socks5', '127.0.0.1:5002', { host: 'example.com', port: 443, type: 'domain' }, new NotAllowedError('example.com is not a cluster name'));
    stats.closed(record, 1, 2, new Error('reset'));
    assert.equal(messages.length, 1, 'events wait for the flush');
    feed.flush();
    const events = messages[1];
    assert.equal(events?.type, 'events');
    if (events?.type !== 'events') return;
    assert.deepEqual(
      events.opened.map((s) => [s.target, s.route, s.via, s.transport]),
      [['web.shop.svc:80', 'prod', 'shop/web-2:8080', 'websocket']],
    );
    assert.deepEqual(
      events.closed.map((s) => [s.via, s.bytesFromClient, s.bytesToClient, s.error]),
      [['shop/web-2:8080', 1, 2, 'reset']],
    );
    assert.deepEqual(
      events.refused.map((f) => [f.target, f.reason, f.message]),
      [['example.com:443', 'not-allowed', 'example.com is not a cluster name']],
    );
    feed.flush();
    assert.equal(messages.length, 2, 'nothing to flush sends nothing');
  } finally {
    stop();
  }
  stats.opened('socks5', '127.0.0.1:5003', destination, 'shop/web-1:8080', 'prod');
  feed.flush();
  assert.equal(messages.length, 2, 'an unsubscribed watcher gets nothing more');
});

test('memory is bounded: recent streams in a ring; a stream event past the cap of one flush makes it a fresh snapshot, refusals a count', () => {
  const { stats, feed, messages, watch } = setUp();
  const stop = watch();
  // Ten streams open, their closes then lost in a burst past the cap: the page must not keep them open.
  const held = Array.from({ length: 10 }, () => stats.opened('socks5', '127.0.0.1:1', destination, 'shop/web-1:8080', 'prod'));
  feed.flush();
  for (let i = 0; i < MAX_PENDING + 50; i++) stats.closed(stats.opened('socks5', '127.0.0.1:1', destination, 'shop/web-1:8080', 'prod'), 1, 1);
  for (const r of held) stats.closed(r, 1, 1);
  feed.flush();
  const fresh = messages.at(-1);
  assert.ok(fresh?.type === 'snapshot', `a snapshot after the drop, got ${fresh?.type}`);
  assert.deepEqual(fresh.open, [], 'no stream shown open that closed');
  assert.equal(fresh.recent.length, RECENT_STREAMS);
  assert.equal(fresh.recent.at(-1)?.id, held.at(-1)!.id, 'the newest last');
  // Refusals past the cap only thin the list of recent ones: events, with the count dropped.
  for (let i = 0; i < MAX_PENDING + 50; i++) stats.failed('socks5', '127.0.0.1:1', destination, new NotAllowedError('not a cluster name'));
  feed.flush();
  const thinned = messages.at(-1);
  assert.ok(thinned?.type === 'events', `events, got ${thinned?.type}`);
  assert.deepEqual([thinned.refused.length, thinned.dropped], [MAX_PENDING, 50]);
  stop();
  const later: FeedMessage[] = [];
  feed.subscribe((m) => later.push(m))();
  assert.ok(later[0]?.type === 'snapshot');
  assert.equal(later[0].recent.length, RECENT_STREAMS);
});

test('a watcher that joins gets what is held in its snapshot only; the others get it as events, once', () => {
  const { stats, feed, messages, watch } = setUp();
  const stop = watch();
  stats.closed(stats.opened('socks5', '127.0.0.1:1', destination, 'shop/web-1:8080', 'prod'), 1, 1);
  const second: FeedMessage[] = [];
  const stopSecond = feed.subscribe((m) => second.push(m));
  feed.flush();
  const closedIn = (all: FeedMessage[]) => all.flatMap((m) => (m.type === 'events' ? m.closed : m.type === 'snapshot' ? m.recent : [])).length;
  assert.equal(closedIn(second), 1, 'in its snapshot, not again in the next events');
  assert.equal(closedIn(messages), 1, 'the first watcher got it as an event');
  feed.stopping();
  assert.equal(second.at(-1)?.type, 'stopping');
  stopSecond();
  stop();
});

test('a sample counts what happened since the last one; routes are sent when a state changes', () => {
  const { stats, feed, messages, setRoutes, watch } = setUp();
  feed.sample(1_000);
  const stop = watch();
  const record = stats.opened('socks5', '127.0.0.1:1', destination, 'shop/web-1:8080', 'prod');
  stats.opened('socks5', '127.0.0.1:2', destination, 'shop/web-1:8080', 'prod');
  stats.failed('socks5', '127.0.0.1:3', undefined, new NotAllowedError('no'));
  stats.closed(record, 100, 5_000);
  const sample = feed.sample(2_000);
  assert.deepEqual(sample, { t: 2_000, newStreams: 2, refused: 1, bytesFromClients: 100, bytesToClients: 5_000, openStreams: 1 });
  assert.equal(messages.filter((m) => m.type === 'routes').length, 1, 'streams moved: the routes (with their counts) are sent');
  assert.deepEqual(feed.sample(3_000), { t: 3_000, newStreams: 0, refused: 0, bytesFromClients: 0, bytesToClients: 0, openStreams: 1 });
  assert.equal(messages.filter((m) => m.type === 'routes').length, 1, 'a quiet second with no change: no routes message');
  setRoutes([{ name: 'prod', kind: 'cluster', state: 'degraded', reason: 'the API server does not answer' }]);
  feed.sample(4_000);
  const routes = messages.filter((m) => m.type === 'routes');
  assert.equal(routes.length, 2);
  assert.equal(routes[1]?.type === 'routes' && routes[1].routes[0]?.state, 'degraded');
  stop();
  const later: FeedMessage[] = [];
  feed.subscribe((m) => later.push(m))();
  assert.ok(later[0]?.type === 'snapshot');
  assert.deepEqual(
    later[0].samples.map((s) => s.t),
    [1_000, 2_000, 3_000, 4_000],
  );
});

test('a stream that moves to another endpoint is shown and closed under the pod that answered', () => {
  const { stats, feed, messages, watch } = setUp();
  const stop = watch();
  try {
    let move: ((via: string) => void) | undefined;
    const record = stats.opened('socks5', '127.0.0.1:5004', destination, 'shop/web-1:8080', 'prod', 'spdy');
    stats.follow(record, { onMove: (listener) => (move = listener) });
    feed.flush();
    move!('shop/web-3:8080');
    feed.flush();
    const update = messages[2];
    assert.equal(update?.type, 'events');
    assert.deepEqual(update?.type === 'events' && update.opened.map((s) => [s.id, s.via]), [[record.id, 'shop/web-3:8080']], 'the open row is replaced');
    assert.equal(stats.snapshot().totalStreams, 1, 'a move is not another stream');
    stats.closed(record, 5, 6);
    feed.flush();
    const closed = messages[3];
    assert.deepEqual(closed?.type === 'events' && closed.closed.map((s) => s.via), ['shop/web-3:8080']);
    move!('shop/web-2:8080');
    assert.equal(record.via, 'shop/web-3:8080', 'a closed stream is not changed any more');
  } finally {
    stop();
  }
});

test('a stream that closes without a byte sends the routes again: their open count is not left behind', () => {
  const { stats, feed, messages, watch } = setUp();
  const stop = watch();
  const record = stats.opened('socks5', '127.0.0.1:1', destination, 'shop/web-1:8080', 'prod');
  feed.sample(1_000);
  const routesSent = () => messages.filter((m) => m.type === 'routes').length;
  assert.equal(routesSent(), 1);
  stats.closed(record, 0, 0);
  const sample = feed.sample(2_000);
  assert.deepEqual([sample.newStreams, sample.openStreams, sample.bytesFromClients + sample.bytesToClients], [0, 0, 0]);
  assert.equal(routesSent(), 2, 'the close alone changed the routes figures');
  stop();
});
