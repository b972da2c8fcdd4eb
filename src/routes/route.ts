// What every kind of route (cluster, direct, reject, ssh, konnectivity) offers the Router.
// The Router owns the table: it matches a destination once, refuses what no route claims, and
// hands the claim (with the parsed name) to the route — no route parses a name twice or writes
// the "not ours" refusal. Readiness, status and close are per route, so one cluster that is down
// or still syncing never holds up another route. Stream and byte counts per route are kept by the
// listeners' stream statistics (listeners/stream-stats.ts), from the route the Router names on
// each opened stream — not by the routes. What only some kinds can do is an optional member
// here, asked for by presence: callers never tell kinds apart by their class.
import type { Duplex } from 'node:stream';
import type { OpenRequest, OpenedStream } from '../core/types.js';
import type { CacheStatus } from '../cluster/cache.js';
import type { PodTransportStats } from '../tunnel/spdy-transport.js';
import type { ClusterName } from './guest-cluster/names.js';

/** Why the table chose the route: the kind of rule that matched (routing/suffix-index.ts RuleSource), a short name, a block, an IP a cluster knows, or direct pass-through. */
export type ClaimReason = 'route-name' | 'cluster-domain' | 'include' | 'ingress' | 'ingress-host' | 'short-name' | 'cidr' | 'known-ip' | 'direct';

/** What the routing decision (routing/table.ts Claim) hands the route it chose: the destination, parsed there once. */
export interface RouteClaim {
  readonly route: { readonly name: string };
  readonly reason: ClaimReason;
  /** Normalized name (lowercase, no trailing dot) or canonical IP (mapped IPv6 as IPv4). */
  readonly host: string;
  readonly isIp: boolean;
  /** The suffix, wildcard or CIDR that matched (a learnt ingress host: the Ingress's own host or "*.x"). */
  readonly pattern?: string;
  /** The Service or Pod the name denotes, when it has a cluster form (parsed by the matcher, once). */
  readonly name?: ClusterName;
}

/** What the matcher asks a route's guest cluster, synchronously (its watch cache answers). */
export interface ClusterView {
  /** Is this (canonical) IP a Service ClusterIP or a running Pod IP of the cluster? */
  knowsIp(ip: string): boolean;
  /** true/false when the cluster can tell; undefined when it cannot (no list permission, syncing). */
  namespaceExists(namespace: string): boolean | undefined;
  /** Namespace of single-label names. */
  readonly defaultNamespace: string;
  /**
   * Does cluster DNS name a pod `<hostname>.<service>.<namespace>.svc` (a ready endpoint of that
   * Service with that hostname)? For the short forms a pod's search path completes to it.
   */
  namesPodHostname?(namespace: string, service: string, hostname: string): boolean;
}

/** 'degraded': it became ready, but its API server does not answer or a watch keeps failing (guest-cluster/health.ts). */
export type RouteState = 'starting' | 'syncing' | 'ready' | 'degraded' | 'error';

/**
 * How the route serves a new stream now, once started: 'ready'; 'degraded', it serves but
 * something is wrong (a watch failing: names may be stale); 'down', a new stream fails at once
 * (the route is in error, or its API server does not answer at all, or there are no credentials
 * to send it). The reason and `since` say why and since when.
 */
export type RouteCondition = 'ready' | 'degraded' | 'down';

export interface RouteStatus {
  name: string;
  kind: string;
  state: RouteState;
  /** Absent while it starts or syncs; the route sets it when it knows more than its state says (routeCondition). */
  condition?: RouteCondition;
  /** Why it is in error or degraded, or what it is waiting for. */
  reason?: string;
  /** Since when it has been in that state (ISO 8601), where the route keeps it. */
  since?: string;
  /** Kind-specific figures (cache counts, tunnels, an SSH chain…), printed as given. */
  details?: Record<string, unknown>;
  /** Added by the proxy: what the route serves (one line) and its streams and bytes. */
  serves?: string;
  streams?: { openStreams: number; totalStreams: number; bytesFromClients: number; bytesToClients: number };
}

export interface Route {
  readonly name: string;
  readonly kind: string;
  /** How failures name it ("cluster route prod (context prod-admin)"); `${kind} route ${name}` when absent. */
  readonly label?: string;
  /**
   * Starts what the route needs (watches, an SSH connection…). Resolves once it can serve;
   * rejects when it cannot start (the route is then in error; the others keep serving).
   */
  start(): Promise<void>;
  /**
   * Work done for every route before any starts (loading a library the route kind needs), so
   * that start() itself can set the route up in one go: a route carried by another (`via`) may
   * ask for it as soon as its own start begins.
   */
  prepare?(): Promise<void>;
  /**
   * What would refuse a stream to this destination now, without opening one (a port mapping's
   * target, checked at start): a Service, namespace or port that is not there. Undefined when
   * nothing is known to be wrong. Optional; never throws.
   */
  check?(claim: RouteClaim, port: number): Promise<string | undefined>;
  /** A stream for a destination the table gave this route; rejects with a ProxyError. */
  open(request: OpenRequest, claim: RouteClaim, signal: AbortSignal): Promise<OpenedStream>;
  status(): RouteStatus;
  /**
   * Learn whether an IP the table does not know is this route's (a cluster looks up a Pod IP it
   * does not watch); afterwards the matcher's view answers for it. Resolves with what kept it from
   * finding out (for a refusal's words), if anything. Optional; never throws.
   */
  learnIp?(ip: string, signal: AbortSignal): Promise<string | undefined>;
  /**
   * While the route first starts or syncs (its view cannot say yet which IPs are its own): a promise
   * that resolves once it is ready or has failed, rejecting only when `signal` aborts. Undefined
   * when it has settled: nothing to wait for. Optional.
   */
  whenSettled?(signal: AbortSignal): Promise<void> | undefined;
  /**
   * The process did not run for `pausedMs` (a laptop asleep): what the route held open may be dead
   * without a sign. Check or replace it before a client waits on it. Optional; never throws.
   */
  afterPause?(pausedMs: number): void;
  /**
   * The cluster whose watch cache names this route's destinations (cluster and konnectivity
   * routes): the matcher asks it which IPs and namespaces it has.
   */
  readonly guest?: GuestClusterView;
  /** The route's port-forward tunnels, per pod (cluster routes), for status output. */
  transportStats?(): PodTransportStats[];
  /**
   * A Duplex to host:port for another route's connections, like net.connect but opened by this
   * route (an ssh route's chain carries a cluster route's API connection: `via`).
   */
  carry?(host: string, port: number, signal: AbortSignal): Promise<Duplex>;
  /**
   * The ingress hosts the route has learnt (cluster routes): `onChange` hears each change from
   * now on (one listener; a later call replaces it); returns the hosts known now.
   */
  watchIngressHosts?(onChange: (hosts: string[]) => void): string[];
  /**
   * Stops accepting streams and releases what it holds once its open streams have ended; with
   * `now` (at stop, after the listeners' grace), a route may release them without that wait.
   */
  close(now?: boolean): Promise<void>;
}

/** A cluster a route reaches names through (routes/guest-cluster/): what the matcher and `status` ask of it. */
export interface GuestClusterView extends ClusterView {
  readonly context: string;
  readonly server: string;
  /** The cluster's namespaces, when it lets us list them (for the PAC's "svc.ns" names). */
  knownNamespaces(): string[] | undefined;
  /** Whether a namespace exists, asking the API server when the cache cannot tell; undefined when it cannot tell either. */
  namespaceFound?(namespace: string): Promise<boolean | undefined>;
  cacheStatus(): CacheStatus;
  /** The API server refuses the credentials (401) and has taken none since. */
  credentialsRefused(): boolean;
  /** No request reaches the API server (it does not answer, or not with a certificate the CA vouches for), or the route never started. */
  apiUnreachable(): boolean;
}

/** The API server URLs of the cluster routes among `routes` (their status details name them). */
export function apiServersOf(routes: readonly RouteStatus[]): string[] {
  return routes.flatMap((r) => (r.kind === 'cluster' && typeof r.details?.server === 'string' ? [r.details.server] : []));
}

/** The route's own condition, or the one its state implies: error is down, starting and syncing have none. */
export function routeCondition(status: Pick<RouteStatus, 'state' | 'condition'>): RouteCondition | undefined {
  if (status.condition) return status.condition;
  return status.state === 'error' ? 'down' : status.state === 'ready' || status.state === 'degraded' ? status.state : undefined;
}
