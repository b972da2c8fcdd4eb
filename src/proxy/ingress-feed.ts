// Learnt ingress hosts → the matchers that decide with them. Each cluster route reports its
// Ingress / OpenShift Route hosts as they change (cluster/ingress-hosts.ts); every change goes at
// once to each generation being fed that holds that very route: the one in force and, while a
// reload is being checked, the candidate too. So whichever table ends up in force — the
// candidate swapped in, or the old one kept after a failed reload — has every change, additions
// and removals alike, and the PAC file (made from the matcher in force) with it.
import type { TableGeneration } from '../routing/router.js';
import { ClusterRouteRuntime } from '../routes/cluster.js';

export class IngressHostFeed {
  private readonly fed = new Set<TableGeneration>();

  /** Feeds a generation from now on: every cluster route's hosts known now, then each change. */
  add(gen: TableGeneration): void {
    this.fed.add(gen);
    for (const route of gen.routes.values()) {
      if (!(route instanceof ClusterRouteRuntime)) continue;
      // A route kept across reloads is in several generations; this one callback serves them all.
      route.onIngressHosts = (hosts) => this.learnt(route, hosts);
      gen.matcher.setIngressHosts(route.name, route.ingressHosts());
    }
  }

  /** Stops feeding a generation: the one a reload replaced, or a reload's candidate not taken. */
  drop(gen: TableGeneration): void {
    this.fed.delete(gen);
  }

  private learnt(route: ClusterRouteRuntime, hosts: string[]): void {
    for (const gen of this.fed) if (gen.routes.get(route.name) === route) gen.matcher.setIngressHosts(route.name, hosts);
  }
}
