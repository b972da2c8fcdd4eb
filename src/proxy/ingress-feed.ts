// Learnt ingress hosts → the matchers that decide with them. Each cluster route reports its
// Ingress / OpenShift Route hosts as they change (cluster/ingress-hosts.ts); every change goes at
// once to each generation being fed that holds that very route: the one in force and, while a
// reload is being checked, the candidate too. So whichever table ends up in force — the
// candidate swapped in, or the old one kept after a failed reload — has every change, additions
// and removals alike, and the PAC file (made from the matcher in force) with it.
import type { Logger } from '../core/log.js';
import type { TableGeneration } from '../routing/router.js';
import type { Route } from '../routes/route.js';

export class IngressHostFeed {
  private readonly fed = new Set<TableGeneration>();
  /** Conflicts of the matcher in force already logged, so each is logged once while it lasts. */
  private logged = new Set<string>();

  constructor(
    private readonly inForce: () => TableGeneration,
    private readonly log: Logger,
  ) {}

  /** Feeds a generation from now on: every cluster route's hosts known now, then each change. */
  add(gen: TableGeneration): void {
    this.fed.add(gen);
    for (const route of gen.routes.values()) {
      // A route kept across reloads is in several generations; this one callback serves them all.
      const hosts = route.watchIngressHosts?.((learnt) => this.learnt(route, learnt));
      if (hosts) gen.matcher.setIngressHosts(route.name, hosts);
    }
    this.reportConflicts();
  }

  /** Stops feeding a generation: the one a reload replaced, or a reload's candidate not taken. */
  drop(gen: TableGeneration): void {
    this.fed.delete(gen);
    this.reportConflicts();
  }

  private learnt(route: Route, hosts: string[]): void {
    for (const gen of this.fed) if (gen.routes.get(route.name) === route) gen.matcher.setIngressHosts(route.name, hosts);
    this.reportConflicts();
  }

  /**
   * A host two clusters learnt is refused by the proxy and sent DIRECT by the PAC file: a browser
   * never shows why, so the proxy says it when the conflict arises in the table in force.
   */
  private reportConflicts(): void {
    const now = new Set<string>();
    for (const { host, routes } of this.inForce().matcher.ingressHostConflicts()) {
      const key = `${host} ${routes.join(' ')}`;
      now.add(key);
      if (!this.logged.has(key)) {
        this.log.warn(
          { host, routes },
          "an ingress host is learnt from more than one cluster: the proxy refuses it and the PAC file sends it DIRECT; add it to one route's include to choose",
        );
      }
    }
    this.logged = now;
  }
}
