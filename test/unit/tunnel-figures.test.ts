// status's per-pod tunnel lines (proxy/tunnel-figures.ts): a route a reload made anew adds its
// figures to its successor's; routes of other names (another cluster, or one a reload removed
// that still drains) are each named, so two clusters' shop/web-0 are not summed into one line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { podFigures } from '../../src/proxy/tunnel-figures.js';
import type { Route } from '../../src/routes/route.js';
import type { PodTransportStats } from '../../src/tunnel/spdy-transport.js';

const route = (name: string, pods: Array<[pod: string, tunnels: number, streams: number]>): Route =>
  ({
    name,
    transportStats: (): PodTransportStats[] => pods.map(([pod, tunnels, streams]) => ({ pod, transport: 'spdy', tunnels, streams })),
  }) as unknown as Route;

test('one route name: figures summed per pod, no route named', () => {
  assert.deepEqual(
    podFigures([
      route('prod', [['shop/web-0', 1, 2]]),
      route('prod', [
        ['shop/web-0', 1, 1],
        ['shop/db-0', 1, 1],
      ]),
    ]),
    [
      { pod: 'shop/db-0', transport: 'spdy', tunnels: 1, streams: 1 },
      { pod: 'shop/web-0', transport: 'spdy', tunnels: 2, streams: 3 },
    ],
  );
});

test('a route removed by a reload, still draining beside the one left: each named, the same pod not summed', () => {
  assert.deepEqual(
    podFigures([route('prod', [['shop/web-0', 1, 1]]), route('staging', [['shop/web-0', 1, 4]])]).map((t) => `${t.route} ${t.pod} ${t.tunnels}/${t.streams}`),
    ['prod shop/web-0 1/1', 'staging shop/web-0 1/4'],
  );
});
