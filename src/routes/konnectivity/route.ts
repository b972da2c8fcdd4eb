// A konnectivity route (how hosted control planes reach their guest clusters):
// names, ClusterIPs and Pod IPs resolve through the guest cluster's watch cache, exactly as for a
// cluster route, and the stream is dialled through the apiserver-network-proxy server instead of
// a pod port-forward (routes/konnectivity/streams.ts, konnectivity/). This owns the cache's life:
// the route is ready once the konnectivity dialer is made, the guest's API server answers and its
// cache has synced. It starts, waits and retries exactly as a cluster route does (../guest-cluster/lifecycle.ts): a
// guest that is down at start or slow to sync is tried again with backoff, and a stream for it
// waits while it starts or syncs.
import type { Logger } from '../../core/log.js';
import type { OpenRequest, OpenedStream } from '../../core/types.js';
import { loadKubeConfig, type LoadedKubeConfig } from '../../cluster/kubeconfig.js';
import { ApiConnection } from '../../cluster/api.js';
import type { EgressOptions } from '../../cluster/egress-proxy.js';
import { ClusterCache } from '../../cluster/cache.js';
import { KonnectivityRoute } from './streams.js';
import { konnectivityResolve } from './resolve.js';
import type { Route, RouteStatus } from '../../routing/route.js';
import type { Claim, ClusterView } from '../../routing/table.js';
import type { KonnectivityRouteSpec } from '../../routing/table-spec.js';
import { probeApi, syncCache } from '../cluster/route.js';
import { RouteLifecycle, type RetryTiming, type Step } from '../guest-cluster/lifecycle.js';
import { RouteHealth } from '../guest-cluster/health.js';
import { CacheResync } from '../guest-cluster/resync.js';

export interface KonnectivityRouteSettings {
  kubeconfig?: string;
  namespace?: string;
  allowHostNetworkPods: boolean;
  egress?: EgressOptions;
  /** Test hook only (../guest-cluster/lifecycle.ts RetryTiming): the first retry's delay. */
  retry?: RetryTiming;
}

export class KonnectivityRouteRuntime implements Route, ClusterView {
  readonly kind = 'konnectivity';
  readonly name: string;
  private readonly kube: LoadedKubeConfig;
  private readonly api: ApiConnection;
  private readonly cache: ClusterCache;
  private readonly route: KonnectivityRoute;
  private readonly life: RouteLifecycle;
  private readonly health: RouteHealth;
  private readonly resync: CacheResync;

  constructor(spec: KonnectivityRouteSpec, settings: KonnectivityRouteSettings, log: Logger) {
    this.name = spec.name;
    this.kube = loadKubeConfig({ kubeconfig: settings.kubeconfig, context: spec.context, namespace: settings.namespace });
    this.api = new ApiConnection(this.kube.kc, settings.egress);
    this.cache = new ClusterCache(this.api, log, this.kube.namespace);
    this.route = new KonnectivityRoute(spec.name, spec.konnectivity, {
      resolve: konnectivityResolve(this.cache, { allowHostNetworkPods: settings.allowHostNetworkPods }),
      log,
    });
    // A failed attempt's cache and dialer go before the next (the dialer is made anew: its TLS
    // files are read again).
    this.health = new RouteHealth('konnectivity', this.api, this.kube.server, this.cache, log);
    this.resync = new CacheResync(this.cache);
    this.life = new RouteLifecycle(
      'konnectivity',
      spec.name,
      log,
      {
        connect: (step) => this.connect(step),
        reset: async () => {
          this.health.stop();
          this.route.stop();
          await this.cache.stop();
        },
      },
      settings.retry,
    );
  }

  get defaultNamespace(): string {
    return this.kube.namespace;
  }

  knowsIp(ip: string): boolean {
    return this.life.state === 'ready' && this.cache.knowsIp(ip);
  }

  namespaceExists(namespace: string): boolean | undefined {
    return this.life.state === 'ready' ? this.cache.namespaceExists(namespace) : undefined;
  }

  async learnIp(ip: string): Promise<void> {
    if (this.life.state === 'ready') await this.cache.findPodByIp(ip).catch(() => undefined);
  }

  /** On failure the route is in error and tries again later (../guest-cluster/lifecycle.ts). */
  start(): Promise<void> {
    return this.life.start();
  }

  /** One attempt: `step` throws once the route is closed, so nothing restarts after close(). */
  private async connect(step: Step): Promise<void> {
    await this.route.start();
    step('starting');
    await probeApi(this.api, this.kube.context, this.kube.server);
    step('syncing');
    await syncCache(this.cache, this.kube.server);
    this.health.start();
  }

  /** After a pause (core/pause-detector.ts): the guest's watches watch again; streams wait for them (bounded). */
  afterPause(): void {
    if (this.life.state !== 'ready') return;
    this.resync.start();
    this.health.check();
  }

  /** Waits while the route starts or syncs, bounded by `signal`; fails at once while it is in error. */
  async open(request: OpenRequest, claim: Claim, signal: AbortSignal): Promise<OpenedStream> {
    await this.life.whenReady(signal);
    await this.resync.wait(signal);
    // Streams go through the konnectivity server, not the guest's API server: a degraded guest
    // (names from a cache that may be stale) still serves them.
    return this.route.open(request, claim, signal);
  }

  status(): RouteStatus {
    const inner = this.route.status();
    const { state, reason, since } = this.life;
    const degraded = state === 'ready' && inner.state === 'ready' ? this.health.check() : undefined;
    const shown = degraded
      ? { state: 'degraded' as const, reason: degraded.reason, since: degraded.since }
      : { state: state === 'ready' ? inner.state : state, ...(reason ? { reason } : {}), since };
    return {
      ...inner,
      ...shown,
      since: new Date(shown.since).toISOString(),
      details: { ...inner.details, context: this.kube.context, cache: this.cache.status() },
    };
  }

  async close(): Promise<void> {
    this.life.close();
    this.health.stop();
    await this.route.close();
    await this.cache.stop();
  }
}
