// How doctor reaches each cluster's API server: the way the proxy does (routes/guest-cluster/egress.ts
// egressFor) — with the table's extra CA (--extra-ca, config extraCA: a TLS-intercepting
// corporate proxy), and for a route `via` an ssh route, through that route, started as the proxy
// starts it. Without them doctor called the API unreachable while the proxy worked.
import { StartupError, errorMessage } from '../core/errors.js';
import { createLogger } from '../core/log.js';
import { loadExtraCA, type EgressOptions, type ExtraCA } from '../cluster/egress-proxy.js';
import { egressFor } from '../routes/guest-cluster/egress.js';
import { SshRoute } from '../routes/ssh/route.js';
import type { RoutingTable } from '../routing/table-spec.js';
import type { ClusterRouteSpec, KonnectivityRouteSpec } from '../routes/spec.js';

export class DoctorEgress {
  private readonly carriers = new Map<string, Promise<SshRoute>>();
  private readonly extraCA?: ExtraCA;
  /** Why the extra CA could not be read (the checks then go on without it). */
  readonly extraCAProblem?: string;

  constructor(private readonly table: RoutingTable) {
    if (table.extraCA) {
      try {
        this.extraCA = loadExtraCA(table.extraCA);
      } catch (err) {
        this.extraCAProblem = errorMessage(err);
      }
    }
  }

  /** The egress of a cluster or konnectivity route; rejects (a one-line StartupError) when its carrier cannot start. */
  async for(route: ClusterRouteSpec | KonnectivityRouteSpec): Promise<EgressOptions> {
    const via = route.kind === 'cluster' ? route.via : undefined;
    return egressFor(this.extraCA, via === undefined ? undefined : await this.carrier(via));
  }

  /** Closes the ssh connections the checks opened. */
  async close(): Promise<void> {
    await Promise.all([...this.carriers.values()].map((c) => c.then((r) => r.close()).catch(() => undefined)));
  }

  private carrier(name: string): Promise<SshRoute> {
    let started = this.carriers.get(name);
    if (!started) {
      const spec = this.table.routes.find((r) => r.name === name);
      // config/load.ts checkVia has made sure `via` names an ssh route.
      if (spec?.kind !== 'ssh') return Promise.reject(new StartupError(`via "${name}" names no ssh route`));
      // Silent: what goes wrong reaches the report through the API check's error.
      const route = new SshRoute(spec, { log: createLogger('silent') });
      started = route.start().then(() => route);
      started.catch(() => undefined);
      this.carriers.set(name, started);
    }
    return started;
  }
}
