// What `status` shows per pod (transport, tunnels, streams): every cluster route's tunnels, and
// those of routes a reload replaced, still open while their streams finish.
import type { Route } from '../routes/route.js';
import type { PodTransportStats } from '../tunnel/spdy-transport.js';

/**
 * Per route, pod and transport, the figures added up (a route made anew tunnels to the same pods
 * as the one it replaced). With several route names among them (routes in the table, or one a
 * reload removed that still drains) each entry says its route: two clusters may both have a shop/web-0.
 */
export function podFigures(routes: readonly Route[]): PodTransportStats[] {
  const named = new Set(routes.map((r) => r.name)).size > 1;
  const byPod = new Map<string, PodTransportStats>();
  for (const route of routes) {
    for (const t of route.transportStats?.() ?? []) {
      const entry = named ? { route: route.name, ...t } : t;
      const key = `${entry.route ?? ''}\0${t.pod}\0${t.transport}`;
      const seen = byPod.get(key);
      byPod.set(key, seen ? { ...seen, tunnels: seen.tunnels + t.tunnels, streams: seen.streams + t.streams } : { ...entry });
    }
  }
  const order = (a: PodTransportStats, b: PodTransportStats) =>
    (a.route ?? '').localeCompare(b.route ?? '') || a.pod.localeCompare(b.pod) || a.transport.localeCompare(b.transport);
  return [...byPod.values()].sort(order);
}
