import type { KubeConfig, V1EndpointSlice, V1Namespace, V1Pod, V1Service } from '@kubernetes/client-node';
import type { Logger } from '../core/log.js';
import { errorMessage, OverloadedError } from '../core/errors.js';
import { ApiStatusError, type ApiConnection } from './api.js';
import { ResilientInformer, type WatchState } from './informer.js';
import { ClusterIndex } from './index.js';

/** Informers for one scope: the whole cluster, or one namespace when RBAC allows no more. */
class WatchSet {
  readonly services: ResilientInformer<V1Service>;
  readonly slices: ResilientInformer<V1EndpointSlice>;
  readonly pods: ResilientInformer<V1Pod>;

  constructor(kc: KubeConfig, api: ApiConnection, log: Logger, readonly namespace: string | undefined, index: ClusterIndex) {
    const core = namespace ? `/api/v1/namespaces/${encodeURIComponent(namespace)}` : '/api/v1';
    const disc = namespace ? `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}` : '/apis/discovery.k8s.io/v1';
    this.services = new ResilientInformer<V1Service>(kc, api, `${core}/services`, log, (e, o) => index.apply('services', e, o));
    this.slices = new ResilientInformer<V1EndpointSlice>(kc, api, `${disc}/endpointslices`, log, (e, o) => index.apply('slices', e, o));
    // Only running pods can be dialled (Pod IPs, named target ports): finished Job pods, often
    // most of a busy cluster's pods, are not kept. The API server sends DELETED when a watched pod
    // stops matching the selector.
    this.pods = new ResilientInformer<V1Pod>(kc, api, `${core}/pods?fieldSelector=${encodeURIComponent('status.phase=Running')}`, log, (e, o) => index.apply('pods', e, o));
  }

  all(): ResilientInformer<any>[] {
    return [this.services, this.slices, this.pods];
  }

  async start(): Promise<void> {
    const results = await Promise.allSettled(this.all().map((i) => i.start()));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      await this.stop();
      throw failed.reason;
    }
  }

  stop(): Promise<void> {
    return Promise.all(this.all().map((i) => i.stop())).then(() => undefined);
  }
}

export interface OnDemandLimits {
  /** Namespaces watched on demand at most (each costs three watches). */
  maxNamespaces: number;
  /** At the limit, a namespace unused this long makes room; none such → the request is refused. */
  evictIdleMs: number;
  /** A namespace RBAC refused is refused again without asking for this long. */
  forbiddenTtlMs: number;
}

/**
 * Without cluster-wide RBAC, any namespace a client names costs three list+watches: bounded here
 * so a client cannot make the proxy watch without limit or hammer the API server with lists it is
 * not allowed.
 */
export const ON_DEMAND_LIMITS: OnDemandLimits = { maxNamespaces: 64, evictIdleMs: 10 * 60_000, forbiddenTtlMs: 30_000 };

export interface CacheStatus {
  scope: 'cluster' | 'namespaces';
  namespaces: string[];
  watches: Record<string, WatchState>;
}

/**
 * The proxy's picture of the cluster: Services, EndpointSlices, Pods and Namespaces, watched
 * cluster-wide when RBAC allows, else per namespace (the context's, plus any a request names).
 * Once warm, resolving a destination costs no API request.
 */
export class ClusterCache {
  private clusterWide?: WatchSet;
  private readonly perNamespace = new Map<string, Promise<WatchSet>>();
  /** The per-namespace sets whose first list is in, for synchronous lookups. */
  private readonly settledSets: WatchSet[] = [];
  private namespaces?: ResilientInformer<V1Namespace>;
  private readonly index = new ClusterIndex(() => this.sets());
  private readonly lastUsed = new Map<string, number>();
  private readonly forbidden = new Map<string, { until: number; err: unknown }>();

  constructor(
    private readonly kc: KubeConfig,
    private readonly api: ApiConnection,
    private readonly log: Logger,
    readonly defaultNamespace: string,
    private readonly limits: OnDemandLimits = ON_DEMAND_LIMITS,
  ) {}

  /** Lists everything once; cluster-wide if allowed, else the default namespace only. */
  async start(): Promise<void> {
    const cluster = new WatchSet(this.kc, this.api, this.log, undefined, this.index);
    try {
      await cluster.start();
      this.clusterWide = cluster;
      this.index.invalidate();
      this.log.info('watching Services, EndpointSlices and Pods cluster-wide');
    } catch (err) {
      if (!(err instanceof ApiStatusError && err.statusCode === 403)) throw err;
      this.log.info({ namespace: this.defaultNamespace, reason: errorMessage(err) }, 'not allowed to watch cluster-wide; watching namespaces on demand');
      await this.ensureNamespace(this.defaultNamespace);
    }
    const namespaces = new ResilientInformer<V1Namespace>(this.kc, this.api, '/api/v1/namespaces', this.log, () => undefined);
    try {
      await namespaces.start();
      this.namespaces = namespaces;
    } catch (err) {
      this.log.info({ reason: errorMessage(err) }, 'not allowed to list namespaces; only watched namespaces count as known');
    }
  }

  async stop(): Promise<void> {
    const sets = [this.clusterWide, ...(await Promise.allSettled(this.perNamespace.values())).map((r) => (r.status === 'fulfilled' ? r.value : undefined))];
    await Promise.all([...sets.map((s) => s?.stop()), this.namespaces?.stop()]);
  }

  /** In per-namespace mode, start watching a namespace a request names (once). */
  async ensureNamespace(namespace: string): Promise<void> {
    if (this.clusterWide) return;
    const now = Date.now();
    const refused = this.forbidden.get(namespace);
    if (refused && refused.until > now) throw refused.err;
    this.lastUsed.set(namespace, now);
    let pending = this.perNamespace.get(namespace);
    if (!pending) {
      if (this.perNamespace.size >= this.limits.maxNamespaces) await this.makeRoom(now);
      const set = new WatchSet(this.kc, this.api, this.log, namespace, this.index);
      pending = set.start().then(() => {
        this.settledSets.push(set);
        this.index.invalidate();
        this.log.info({ namespace }, 'watching namespace');
        return set;
      });
      pending.catch((err: unknown) => {
        this.perNamespace.delete(namespace);
        this.lastUsed.delete(namespace);
        if (err instanceof ApiStatusError && err.statusCode === 403) {
          if (this.forbidden.size >= 10_000) this.forbidden.clear();
          this.forbidden.set(namespace, { until: Date.now() + this.limits.forbiddenTtlMs, err });
        }
      });
      this.perNamespace.set(namespace, pending);
    }
    await pending;
  }

  /** At the limit: stop watching the namespace unused longest, if it has been idle long enough. */
  private async makeRoom(now: number): Promise<void> {
    let victim: string | undefined;
    for (const [ns, at] of this.lastUsed) {
      if (ns === this.defaultNamespace || !this.perNamespace.has(ns) || now - at < this.limits.evictIdleMs) continue;
      if (victim === undefined || at < this.lastUsed.get(victim)!) victim = ns;
    }
    if (victim === undefined) {
      throw new OverloadedError(`already watching ${this.perNamespace.size} namespaces on demand, all in use (no cluster-wide list/watch permission)`);
    }
    const pending = this.perNamespace.get(victim)!;
    this.perNamespace.delete(victim);
    this.lastUsed.delete(victim);
    const set = await pending.catch(() => undefined);
    if (!set) return;
    const i = this.settledSets.indexOf(set);
    if (i >= 0) this.settledSets.splice(i, 1);
    this.index.invalidate();
    await set.stop();
    this.log.info({ namespace: victim }, 'stopped watching an idle namespace to make room');
  }

  /** true/false when we can tell; undefined when namespaces cannot be listed and it is not watched. */
  namespaceExists(namespace: string): boolean | undefined {
    if (this.namespaces) return this.namespaces.get(namespace) !== undefined;
    return this.perNamespace.has(namespace) ? true : undefined;
  }

  get lookup(): ClusterIndex {
    return this.index;
  }

  status(): CacheStatus {
    const watches: Record<string, WatchState> = {};
    for (const set of this.sets()) for (const inf of set.all()) watches[inf.path] = inf.status;
    if (this.namespaces) watches[this.namespaces.path] = this.namespaces.status;
    return {
      scope: this.clusterWide ? 'cluster' : 'namespaces',
      namespaces: this.clusterWide ? [] : [...this.perNamespace.keys()],
      watches,
    };
  }

  private sets(): WatchSet[] {
    return this.clusterWide ? [this.clusterWide] : this.settledSets;
  }
}
