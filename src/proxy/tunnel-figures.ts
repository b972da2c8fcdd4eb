// What `status` shows per pod (transport, tunnels, streams): the default cluster route's tunnels,
// and those of the default cluster route a reload replaced, still open while its streams finish.
import type { Route } from '../routes/route.js';
import type { PodTransportStats } from '../tunnel/spdy-transport.js';

/** Per pod and transport, the routes' figures added up (a route made anew tunnels to the same pods). */
export function podFigures(routes: ReadonlyArray<Route | undefined>): PodTransportStats[] {
  const byPod = new Map<string, PodTransportStats>();
  for (const route of routes) {
    for (const t of route?.transportStats?.() ?? []) {
      const key = `${t.pod}\0${t.transport}`;
      const seen = byPod.get(key);
      if (seen) byPod.set(key, { ...seen, tunnels: seen.tunnels + t.tunnels, streams: seen.streams + t.streams });
      else byPod.set(key, { ...t });
    }
  }
  return [...byPod.values()].sort((a, b) => a.pod.localeCompare(b.pod) || a.transport.localeCompare(b.transport));
}
