// A konnectivity route (seeds 000/004: hosted control planes reaching their guest clusters):
// names, ClusterIPs and Pod IPs resolve through the guest cluster's watch cache, exactly as for a
// cluster route, and the stream is dialled through the apiserver-network-proxy server instead of
// a pod port-forward (routing/konnectivity-route.ts, konnectivity/). This owns the cache's life:
// the route is ready once the guest's API server answers and its cache has synced.
import type { Logger } from '../core/log.js';
import type { OpenRequest, OpenedStream } from '../core/types.js';
import { RouteUnavailableError, errorMessage } from '../core/errors.js';
import { loadKubeConfig, type LoadedKubeConfig } from '../cluster/kubeconfig.js';
import { ApiConnection } from '../cluster/api.js';
import type { EgressOptions } from '../cluster/egress-proxy.js';
import { ClusterCache } from '../cluster/cache.js';
import { KonnectivityRoute } from '../routing/konnectivity-route.js';
import { konnectivityResolve } from '../routing/konnectivity-resolve.js';
import type { Route, RouteState, RouteStatus } from '../routing/route.js';
import type { Claim, ClusterView } from '../routing/table.js';
import type { KonnectivityRouteSpec } from '../routing/table-spec.js';
import { probeApi, syncCache } from './cluster.js';

export interface KonnectivityRouteSettings {
  kubeconfig?: string;
  namespace?: string;
  allowHostNetworkPods: boolean;
  egress?: EgressOptions;
}

export class KonnectivityRouteRuntime implements Route, ClusterView {
  readonly kind = 'konnectivity';
  readonly name: string;
  private readonly kube: LoadedKubeConfig;
  private readonly api: ApiConnection;
  private readonly cache: ClusterCache;
  private readonly route: KonnectivityRoute;
  private state: RouteState = 'starting';
  private reason?: string;

  constructor(spec: KonnectivityRouteSpec, settings: KonnectivityRouteSettings, log: Logger) {
    this.name = spec.name;
    this.kube = loadKubeConfig({ kubeconfig: settings.kubeconfig, context: spec.context, namespace: settings.namespace });
    this.api = new ApiConnection(this.kube.kc, settings.egress);
    this.cache = new ClusterCache(this.api, log, this.kube.namespace);
    this.route = new KonnectivityRoute(spec.name, spec.konnectivity, { resolve: konnectivityResolve(this.cache, { allowHostNetworkPods: settings.allowHostNetworkPods }), log });
  }

  get defaultNamespace(): string {
    return this.kube.namespace;
  }

  knowsIp(ip: string): boolean {
    return this.state === 'ready' && this.cache.knowsIp(ip);
  }

  namespaceExists(namespace: string): boolean | undefined {
    return this.state === 'ready' ? this.cache.namespaceExists(namespace) : undefined;
  }

  async learnIp(ip: string): Promise<void> {
    if (this.state === 'ready') await this.cache.findPodByIp(ip).catch(() => undefined);
  }

  async start(): Promise<void> {
    try {
      await this.route.start();
      await probeApi(this.api, this.kube.context, this.kube.server);
      this.state = 'syncing';
      await syncCache(this.cache, this.kube.server);
      this.state = 'ready';
    } catch (err) {
      this.state = 'error';
      this.reason = errorMessage(err);
      throw err;
    }
  }

  async open(request: OpenRequest, claim: Claim, signal: AbortSignal): Promise<OpenedStream> {
    if (this.state !== 'ready') throw new RouteUnavailableError(`konnectivity route ${this.name} is not available: ${this.reason ?? `still ${this.state}`}`);
    return this.route.open(request, claim, signal);
  }

  status(): RouteStatus {
    const inner = this.route.status();
    return { ...inner, state: this.state === 'ready' ? inner.state : this.state, ...(this.reason ? { reason: this.reason } : {}), details: { ...inner.details, context: this.kube.context, cache: this.cache.status() } };
  }

  async close(): Promise<void> {
    await this.route.close();
    await this.cache.stop();
  }
}
