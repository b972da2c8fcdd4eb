// A konnectivity route (how hosted control planes reach their guest clusters; it does the job of
// the SOCKS sidecar such a control plane runs beside its components): a guest cluster
// (../guest-cluster/) whose watch cache resolves names, ClusterIPs and Pod IPs exactly as for a
// cluster route, with streams dialled through the apiserver-network-proxy server instead of a pod
// port-forward (streams.ts, konnectivity/). It is ready once the konnectivity dialer is made, the
// guest's API server answers and its cache has synced; it starts, waits and retries exactly as a
// cluster route does: a guest that is down at start or slow to sync is tried again with backoff,
// and a stream for it waits while it starts or syncs.
import type { Logger } from '../../core/log.js';
import type { OpenRequest, OpenedStream } from '../../core/types.js';
import type { Route, RouteStatus } from '../route.js';
import type { RouteClaim } from '../route.js';
import type { KonnectivityRouteSpec } from '../../routes/spec.js';
import { GuestCluster, type GuestClusterSettings } from '../guest-cluster/guest-cluster.js';
import { KonnectivityStreams } from './streams.js';
import { konnectivityResolve } from './resolve.js';

export interface KonnectivityRouteSettings extends Omit<GuestClusterSettings, 'apiChecked'> {
  allowHostNetworkPods: boolean;
  /** The guest's DNS domain (default cluster.local). */
  clusterDomain?: string;
  /** How often a failing server is dialled to see it serve again (10 s; a test hook). */
  probeIntervalMs?: number;
}

export class KonnectivityRoute implements Route {
  readonly kind = 'konnectivity';
  readonly name: string;
  readonly guest: GuestCluster;
  private readonly streams: KonnectivityStreams;

  constructor(spec: KonnectivityRouteSpec, settings: KonnectivityRouteSettings, log: Logger) {
    this.name = spec.name;
    // A failed attempt's dialer goes with its cache before the next (the dialer is made anew: its
    // TLS files are read again).
    this.guest = new GuestCluster('konnectivity', spec, settings, log, {
      beforeProbe: async (step) => {
        await this.streams.start();
        step('starting');
      },
      reset: () => this.streams.stop(),
    });
    this.streams = new KonnectivityStreams(spec.name, spec.konnectivity, {
      resolve: konnectivityResolve(this.guest.cache, { allowHostNetworkPods: settings.allowHostNetworkPods, clusterDomain: settings.clusterDomain }),
      // What doctor's test dial reaches: the guest's API server, through its kubernetes Service.
      probeTarget: () => {
        const svc = this.guest.cache.lookup.service('default', 'kubernetes');
        const ip = svc?.clusterIPs[0];
        return ip ? { ip, port: svc.ports.find((p) => p.protocol === 'TCP')?.port ?? 443 } : undefined;
      },
      probeIntervalMs: settings.probeIntervalMs,
      log,
    });
  }

  learnIp(ip: string): Promise<string | undefined> {
    return this.guest.learnIp(ip);
  }

  whenSettled(signal: AbortSignal): Promise<void> | undefined {
    return this.guest.whenSettled(signal);
  }

  /** On failure the route is in error and tries again later (../guest-cluster/lifecycle.ts). */
  start(): Promise<void> {
    return this.guest.start();
  }

  /**
   * After a pause (core/pause-detector.ts): the guest's watches watch again, streams wait for them
   * (bounded), and dial through a new connection to the konnectivity server.
   */
  afterPause(): void {
    this.guest.afterPause();
    this.streams.afterPause();
  }

  /** Waits while the route starts or syncs, bounded by `signal`; fails at once while it is in error. */
  async open(request: OpenRequest, claim: RouteClaim, signal: AbortSignal): Promise<OpenedStream> {
    await this.guest.whenReady(signal);
    // Streams go through the konnectivity server, not the guest's API server: a degraded guest
    // (names from a cache that may be stale) still serves them.
    return this.streams.open(request, claim, signal);
  }

  status(): RouteStatus {
    const dialer = this.streams.status();
    // Its streams do not go through the guest's API server: one that does not answer leaves it degraded, not down.
    const { unreachable: _, ...state } = this.guest.status();
    const apiRoundTrip = this.guest.apiRoundTrip();
    // A server that failed the last dial degrades a route whose guest is fine: its streams fail.
    const failing = state.state === 'ready' ? this.streams.failure() : undefined;
    return {
      ...dialer,
      ...state,
      ...(failing ? { state: 'degraded' as const, reason: failing.reason, since: failing.since } : {}),
      details: { ...dialer.details, context: this.guest.kube.context, ...(apiRoundTrip ? { apiRoundTrip } : {}), cache: this.guest.cacheStatus() },
    };
  }

  async close(): Promise<void> {
    this.guest.close();
    await this.streams.close();
    await this.guest.stop();
  }
}
