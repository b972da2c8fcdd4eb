// One builder per route kind: the composition root hands a validated table to buildRoutes and
// gets a live Route per entry (plus the cluster views the matcher asks about IPs and namespaces).
// Construction is synchronous and fails with a StartupError for what the table got wrong (an
// unknown context, an unreadable kubeconfig); what can only be found out over the network is
// start()'s business, route by route.
import type { Logger } from '../core/log.js';
import type { HostPort } from '../core/address.js';
import { DirectRoute } from '../routing/direct-route.js';
import { RejectRoute } from '../routing/reject-route.js';
import type { Route } from '../routing/route.js';
import { RouteMatcher, type ClusterView } from '../routing/table.js';
import type { RouteSpec, RoutingTable } from '../routing/table-spec.js';
import type { TableGeneration } from '../routing/router.js';
import { ClusterRouteRuntime, type ClusterRouteSettings } from './cluster.js';

export interface BuildSettings extends Omit<ClusterRouteSettings, 'kubeconfig' | 'namespace'> {
  kubeconfig?: string;
  /** Per route name: the kubeconfig to use instead (a managed daemon's transient kubeconfigs). */
  routeKubeconfigs?: Readonly<Record<string, string>>;
  /** -n: the default cluster route's namespace for short names. */
  namespace?: string;
  /** The proxy's bound listener addresses (direct routes never dial them). */
  ownListeners: () => ReadonlyArray<HostPort>;
}

/** A table with its live routes; `reuse` keeps routes of an older generation whose spec is unchanged. */
export interface BuiltTable extends TableGeneration {
  readonly table: RoutingTable;
  /** The routes made for this table (not the reused ones): start them, and close them if it is not taken. */
  readonly fresh: Route[];
}

export function buildTable(table: RoutingTable, settings: BuildSettings, log: Logger, reuse?: BuiltTable): BuiltTable {
  const routes = new Map<string, Route>();
  const fresh: Route[] = [];
  const views = new Map<string, ClusterView>();
  try {
    for (const spec of table.routes) {
      const kept = reuse && sameSpec(reuse.table, table, spec) ? reuse.routes.get(spec.name) : undefined;
      const route = kept ?? buildRoute(spec, table, settings, log);
      if (!kept) fresh.push(route);
      routes.set(spec.name, route);
      if (route instanceof ClusterRouteRuntime) views.set(spec.name, route);
    }
    return { table, routes, fresh, matcher: new RouteMatcher(table, views) };
  } catch (err) {
    for (const r of fresh) void r.close();
    throw err;
  }
}

function buildRoute(spec: RouteSpec, table: RoutingTable, settings: BuildSettings, log: Logger): Route {
  switch (spec.kind) {
    case 'cluster':
      return new ClusterRouteRuntime(
        spec,
        {
          ...settings,
          kubeconfig: settings.routeKubeconfigs?.[spec.name] ?? settings.kubeconfig,
          namespace: table.defaultRoute === spec.name ? settings.namespace : undefined,
        },
        log.child({ route: spec.name }),
      );
    case 'direct':
      return new DirectRoute(spec.name, { ownListeners: settings.ownListeners });
    case 'reject':
      return new RejectRoute(spec.name);
  }
}

/** A route is kept across a reload when its spec and its role (default route or not) are the same. */
function sameSpec(before: RoutingTable, after: RoutingTable, spec: RouteSpec): boolean {
  const old = before.routes.find((r) => r.name === spec.name);
  if (!old) return false;
  const strip = (r: RouteSpec) => JSON.stringify({ ...r, origin: undefined });
  const role = (t: RoutingTable) => t.defaultRoute === spec.name;
  return strip(old) === strip(spec) && role(before) === role(after) && before.clusterDomain === after.clusterDomain;
}
