// A table's generation (routing/router.ts): a live Route per entry, built by its kind
// (src/routes/<kind>/), and the matcher over them, which asks the routes' guest clusters about IPs
// and namespaces. Here, in the composition root, because it joins the decision and the routes.
// Construction is synchronous and fails with a StartupError for what the table got wrong (an
// unknown context, an unreadable kubeconfig); what can only be found out over the network is
// start()'s business, route by route.
import type { Logger } from '../core/log.js';
import type { HostPort } from '../core/address.js';
import { parseCidr, type Cidr } from '../core/cidr.js';
import { fromConfigFile } from './startup-checks.js';
import { DirectRoute } from '../routes/direct/route.js';
import { RejectRoute } from '../routes/reject/route.js';
import { SshRoute } from '../routes/ssh/route.js';
import type { Route } from '../routes/route.js';
import { RouteMatcher } from '../routing/table.js';
import type { ClusterView } from '../routes/route.js';
import type { RoutingTable } from '../routing/table-spec.js';
import type { RouteSpec } from '../routes/spec.js';
import type { TableGeneration } from '../routing/router.js';
import { ClusterRoute, type ClusterRouteSettings } from '../routes/cluster/route.js';
import { KonnectivityRoute } from '../routes/konnectivity/route.js';
import { loadExtraCA } from '../cluster/egress-proxy.js';
import { contextFingerprint } from '../cluster/kubeconfig-files.js';
import { egressFor } from '../routes/guest-cluster/egress.js';

export interface BuildSettings extends Omit<ClusterRouteSettings, 'kubeconfig' | 'namespace' | 'egress'> {
  egress?: ClusterRouteSettings['egress'];
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
  /** What its routes were built with (a reload keeps a route only when these are the same for it). */
  readonly settings: BuildSettings;
  /** Fresh routes made in place of failing ones: a reload does not fail when they still fail. */
  readonly retried: ReadonlySet<Route>;
  /** The routes made for this table (not the reused ones): start them, and close them if it is not taken. */
  readonly fresh: Route[];
  /** Per route with a kubeconfig context: its entries as they were read (kept only while unchanged). */
  readonly kubeconfigs: ReadonlyMap<string, string>;
}

export function buildTable(table: RoutingTable, settings: BuildSettings, log: Logger, reuse?: BuiltTable): BuiltTable {
  const routes = new Map<string, Route>();
  const fresh: Route[] = [];
  const retried = new Set<Route>();
  const views = new Map<string, ClusterView>();
  const kubeconfigs = new Map<string, string>();
  const extraCA = table.extraCA ? loadExtraCA(table.extraCA) : undefined;
  try {
    // Routes that carry others (`via`) first: a cluster route takes its carrier's dial.
    const order = [...table.routes].sort((a, b) => Number(a.kind === 'cluster') - Number(b.kind === 'cluster'));
    for (const spec of order) {
      const via = spec.kind === 'cluster' && spec.via ? routes.get(spec.via) : undefined;
      // A route kept across a reload keeps its carrier: not when that carrier is new.
      const previous = reuse && sameSpec(reuse.table, table, spec) && !(via && fresh.includes(via)) ? reuse.routes.get(spec.name) : undefined;
      // A route that is failing (in error, or on a retry since) is made anew: a reload is how a
      // user says "try again with what is on disk now" (a fixed kubeconfig, a renewed CA file).
      const failing = previous !== undefined && isFailing(previous);
      // The kubeconfig read again: a token, server or CA edited there is a changed route (kubectl
      // would use the edit at once), though the table names the same context.
      const kubeconfig = 'context' in spec ? contextFingerprint(settings.routeKubeconfigs?.[spec.name] ?? settings.kubeconfig, spec.context) : '';
      kubeconfigs.set(spec.name, kubeconfig);
      const unchanged = () => sameCredentials(reuse!.settings, settings, spec.name) && reuse!.kubeconfigs.get(spec.name) === kubeconfig;
      const kept = previous && !failing && unchanged() ? previous : undefined;
      const egress = egressFor(extraCA, via);
      const route = kept ?? fromConfigFile(spec, () => buildRoute(spec, table, { ...settings, egress }, log));
      if (!kept) fresh.push(route);
      if (failing) retried.add(route);
      routes.set(spec.name, route);
      if (route.guest) views.set(spec.name, route.guest);
    }
    // The table's order stays (it decides nothing but is how status lists the routes).
    const ordered = new Map(table.routes.map((r) => [r.name, routes.get(r.name)!]));
    return { table, settings, routes: ordered, fresh, retried, kubeconfigs, matcher: new RouteMatcher(table, views) };
  } catch (err) {
    for (const r of fresh) void r.close();
    throw err;
  }
}

function buildRoute(spec: RouteSpec, table: RoutingTable, settings: BuildSettings, log: Logger): Route {
  switch (spec.kind) {
    case 'cluster':
      return new ClusterRoute(
        spec,
        {
          ...settings,
          kubeconfig: settings.routeKubeconfigs?.[spec.name] ?? settings.kubeconfig,
          namespace: table.defaultRoute === spec.name ? settings.namespace : undefined,
        },
        log.child({ route: spec.name }),
      );
    case 'direct':
      return new DirectRoute(spec.name, {
        ownListeners: settings.ownListeners,
        allow: (spec.allow ?? []).map((block) => parseCidr(block)),
        rejected: rejectedBlocks(table),
      });
    case 'reject':
      return new RejectRoute(spec.name);
    case 'ssh':
      return new SshRoute(spec, { log: log.child({ route: spec.name }) });
    case 'konnectivity':
      return new KonnectivityRoute(
        spec,
        {
          kubeconfig: settings.routeKubeconfigs?.[spec.name] ?? settings.kubeconfig,
          namespace: table.defaultRoute === spec.name ? settings.namespace : undefined,
          allowHostNetworkPods: settings.allowHostNetworkPods,
          clusterDomain: settings.clusterDomain,
          egress: settings.egress,
        },
        log.child({ route: spec.name }),
      );
  }
}

/** A route is kept across a reload when its spec and its role (default route or not) are the same. */
function sameSpec(before: RoutingTable, after: RoutingTable, spec: RouteSpec): boolean {
  const old = before.routes.find((r) => r.name === spec.name);
  if (!old) return false;
  // Where the file says it (origin, the line of `via`) is no part of it: a comment or a route
  // added above must not remake a route (a new cache to sync, which a reload must wait for).
  const strip = (r: RouteSpec) => JSON.stringify({ ...r, origin: undefined, viaLine: undefined });
  const role = (t: RoutingTable) => t.defaultRoute === spec.name;
  // A direct route holds the reject routes' blocks too.
  const blocks = (t: RoutingTable) => (spec.kind === 'direct' ? JSON.stringify(rejectedBlocks(t).map((b) => [b.route, b.cidr.text])) : '');
  return (
    strip(old) === strip(spec) &&
    role(before) === role(after) &&
    before.clusterDomain === after.clusterDomain &&
    before.extraCA === after.extraCA &&
    blocks(before) === blocks(after)
  );
}

/** The reject routes' cidrs, for the direct route (a name resolving into one is refused). */
function rejectedBlocks(table: RoutingTable): Array<{ cidr: Cidr; route: string }> {
  return table.routes.flatMap((r) => (r.kind === 'reject' ? (r.cidrs ?? []).map((block) => ({ cidr: parseCidr(block), route: r.name })) : []));
}

function isFailing(route: Route): boolean {
  const { state, reason } = route.status();
  // Degraded is a route that started and keeps its cache: a reload keeps it as it is.
  return state === 'error' || (state !== 'ready' && state !== 'degraded' && reason !== undefined);
}

/** The same kubeconfig file for the route (a managed daemon's reload may hand it another). */
function sameCredentials(before: BuildSettings, after: BuildSettings, name: string): boolean {
  return (before.routeKubeconfigs?.[name] ?? before.kubeconfig) === (after.routeKubeconfigs?.[name] ?? after.kubeconfig);
}
