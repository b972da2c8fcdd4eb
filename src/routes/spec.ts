// What the routing table says of each route: the kind, the names and blocks it serves, and what
// that kind needs (a context, an SSH host, a konnectivity server…). config/ makes these, the
// matcher (routing/table.ts) indexes their patterns and each route kind is built from its own
// (proxy/build-table.ts). The table as a whole is routing/table-spec.ts.
import type { KonnectivitySpec } from '../konnectivity/options.js';

/** The route kinds this version knows. A new kind is added here, in config/validate.ts and in proxy/build-table.ts. */
export const ROUTE_KINDS = ['cluster', 'direct', 'reject', 'ssh', 'konnectivity'] as const;
export type RouteKind = (typeof ROUTE_KINDS)[number];

interface RouteSpecBase {
  /** Unique, lowercase. For cluster routes also a name suffix: <svc>.<ns>.<name>, <svc>.<ns>.svc.<name>. */
  name: string;
  /** Name suffixes, wildcards or "." this route serves (normalized: lowercase, no trailing dot). */
  include: string[];
  /** Name suffixes or wildcards this route does not serve, even where an include or its name would match. */
  exclude: string[];
  /** IP blocks this route serves, canonical "network/prefix". */
  cidrs: string[];
  /** Where the route was defined, for messages: "config.yaml:12", "--context prod", "--direct". */
  origin: string;
}

export interface IngressSpec {
  /** Exact host names and "*." wildcards sent to the cluster's ingress controller. */
  domains: string[];
  /** "namespace/service" of the ingress controller; detected when unset. */
  controller?: string;
  /** Ingress class name → "namespace/service" of the controller serving it (several controllers). */
  classes?: Record<string, string>;
}

export interface ClusterRouteSpec extends RouteSpecBase {
  kind: 'cluster';
  /** A context of the kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config). */
  context: string;
  ingress?: IngressSpec;
  /** An ssh route whose chain carries this cluster's API connections (its API answers only behind it). */
  via?: string;
  /** Line of `via:`, for messages. */
  viaLine?: number;
}

/**
 * A guest cluster reached through an apiserver-network-proxy (konnectivity) server: names and IPs
 * resolve through `context`'s watch cache like a cluster route's, bytes go through the server.
 */
export interface KonnectivityRouteSpec extends RouteSpecBase {
  kind: 'konnectivity';
  /** The guest cluster's kubeconfig context (its API answers the watches). */
  context: string;
  konnectivity: KonnectivitySpec;
}

export interface DirectRouteSpec extends RouteSpecBase {
  kind: 'direct';
  /** Canonical CIDR blocks it may dial though they are loopback, link-local or metadata addresses. */
  allow?: string[];
}

export interface RejectRouteSpec extends RouteSpecBase {
  kind: 'reject';
}

/** Streams leave through an SSH connection (direct-tcpip channels); the far end resolves names. */
export interface SshRouteSpec extends RouteSpecBase {
  kind: 'ssh';
  ssh: {
    /** A Host of ~/.ssh/config (or a plain host name, [user@]host[:port]); its ProxyJump chain is followed. */
    host: string;
  };
}

export type RouteSpec = ClusterRouteSpec | KonnectivityRouteSpec | DirectRouteSpec | RejectRouteSpec | SshRouteSpec;

/** Routes whose names and IPs come from a cluster's watch cache (cluster and konnectivity). */
export function hasClusterNames(route: RouteSpec): route is ClusterRouteSpec | KonnectivityRouteSpec {
  return route.kind === 'cluster' || route.kind === 'konnectivity';
}
