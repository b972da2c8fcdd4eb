import type { Logger } from '../core/log.js';
import { errorMessage } from '../core/errors.js';
import { ApiStatusError, type ApiConnection } from './api.js';
import { WatchStoppedError } from './watch-options.js';
import { ResilientInformer, WATCH_DEADLINES, type InformerHooks, type SyncProgress, type WatchDeadlines, type WatchState } from './informer.js';
import { closeAgents } from './list-watch.js';
import { ApiReachability } from './api-reachability.js';
import { monotonicMs } from '../core/clock.js';

/** The watches are renewed after a return of the API server at most this often. */
export const RENEW_MIN_INTERVAL_MS = 5_000;
import { PodLookup, POD_LOOKUP_LIMITS } from './pod-lookup.js';
import { normalizeIp } from '../core/ip.js';
import { slimNamespace, type SlimNamespace, type SlimPod } from './slim.js';
import { ClusterIndex } from './index.js';
import { WatchSet } from './watch-set.js';
import { kindOf, PROGRESS_LOG_INTERVAL_MS, ProgressPacer, watchLabel, type CacheStatus, type CacheWatchOptions } from './cache-status.js';

import { OnDemandNamespaces, ON_DEMAND_LIMITS, type OnDemandLimits } from './on-demand-namespaces.js';

export { kindOf, watchLabel, type CacheStatus, type CacheWatchOptions } from './cache-status.js';
export { ON_DEMAND_LIMITS, type OnDemandLimits } from './on-demand-namespaces.js';

/**
 * The proxy's picture of the cluster: Services, EndpointSlices, Pods and Namespaces, watched
 * cluster-wide when RBAC allows, else per namespace (the context's, plus any a request names).
 * Once warm, resolving a destination costs no API request.
 */
export class ClusterCache {
  private clusterWide?: WatchSet;
  private readonly onDemand: OnDemandNamespaces;
  private namespaces?: ResilientInformer<SlimNamespace>;
  private readonly index = new ClusterIndex(
    () => this.sets(),
    (namespace, name, uid) => this.pods.forget(namespace, name, uid),
  );
  /** While start() runs: the cluster-wide set and the namespace list, still on their first list. */
  private syncingSet?: WatchSet;
  private syncingNamespaces?: ResilientInformer<SlimNamespace>;
  private readonly pods: PodLookup;

  constructor(
    private readonly api: ApiConnection,
    private readonly log: Logger,
    readonly defaultNamespace: string,
    limits: OnDemandLimits = ON_DEMAND_LIMITS,
    private readonly watchOptions: CacheWatchOptions = {},
  ) {
    this.onDemand = new OnDemandNamespaces(
      log,
      defaultNamespace,
      limits,
      (ns, hooks) => this.newWatchSet(ns, hooks),
      () => this.index.invalidate(),
    );
    this.pods = new PodLookup(api, log, (pod) => this.index.onPodGone?.(pod.namespace, pod.name, pod.uid), watchOptions.podLookup ?? POD_LOOKUP_LIMITS);
  }

  private stopListening?: () => void;
  private renewedAt = -Infinity;

  private get watchPods(): boolean {
    return this.watchOptions.watchPods === true;
  }

  /** Is this IP a Service ClusterIP, an endpoint's or a pod's this cluster knows? Synchronous, no API request. */
  knowsIp(ip: string): boolean {
    const n = normalizeIp(ip);
    return this.index.knowsIp(n) || this.pods.knows(n);
  }

  /**
   * The running pod with this IP (host-network pods lose ties). Watched pods: from the index;
   * else looked up (cluster-wide, or in one namespace without cluster-wide permission), the
   * answer kept a few seconds.
   */
  async findPodByIp(ip: string, namespace?: string): Promise<SlimPod | undefined> {
    const n = normalizeIp(ip);
    if (this.watchPods) return this.index.podByIp(n);
    // Without cluster-wide permission: the namespace asked for, else the one whose Service lists the IP, else the default.
    const found = await this.pods.byIp(n, this.clusterWide ? namespace : (namespace ?? this.index.endpointNamespace(n) ?? this.defaultNamespace));
    if (found) return found;
    // The field selector status.podIP matches a pod's first IP only (pkg/registry/core/pod/
    // strategy.go PodToSelectableFields): a dual-stack pod's other address is found through the
    // EndpointSlice endpoint that lists it, by the pod's name; with no Service, where the
    // destination names the namespace, by one list of that namespace (never cluster-wide).
    const ref = this.index.endpointPod(n);
    if (ref && (namespace === undefined || ref.namespace === namespace)) {
      const pod = await this.pods.byName(ref.namespace, ref.name);
      if (pod?.ips.includes(n)) return pod;
    }
    return namespace === undefined ? undefined : this.pods.anyIpIn(n, namespace);
  }

  /** Lists everything once; cluster-wide if allowed, else the default namespace only. */
  async start(): Promise<void> {
    const startedAt = Date.now();
    // The API server back after an absence: the watches held across it may be dead without a
    // sign (a NAT that forgot them, the name now resolving elsewhere): watch again, on new connections.
    this.stopListening ??= ApiReachability.of(this.api).onReturn(() => {
      // Not more than every few seconds, however many streams fail meanwhile.
      if (monotonicMs() - this.renewedAt < RENEW_MIN_INTERVAL_MS) return;
      this.renewedAt = monotonicMs();
      this.log.info('the API server answers again; renewing the watches');
      void this.afterPause(0);
    });
    // The namespace list runs alongside: it only decides which names are worth a look-up.
    const namespaces = new ResilientInformer(this.api, '/api/v1/namespaces', this.log, () => undefined, slimNamespace, this.deadlines, this.watchOptions);
    this.syncingNamespaces = namespaces;
    const namespacesSynced = namespaces.start().then(
      () => {
        if (this.syncingNamespaces === namespaces) this.namespaces = namespaces;
      },
      (err: unknown) => {
        // Stopped with the sync (a start given up, a reload refused): the server refused nothing.
        if (err instanceof WatchStoppedError) return;
        this.log.info({ reason: errorMessage(err) }, 'not allowed to list namespaces; only watched namespaces count as known');
      },
    );
    const progressMs = this.watchOptions.progressIntervalMs ?? PROGRESS_LOG_INTERVAL_MS;
    const pacer = new ProgressPacer();
    const progress = setInterval(() => this.logProgress(pacer), progressMs);
    progress.unref();
    try {
      const cluster = this.newWatchSet(undefined);
      this.syncingSet = cluster;
      try {
        await cluster.start();
        this.clusterWide = cluster;
        this.index.invalidate();
        this.log.info(this.watchPods ? 'watching Services, EndpointSlices and Pods cluster-wide' : 'watching Services and EndpointSlices cluster-wide');
      } catch (err) {
        if (!(err instanceof ApiStatusError && err.statusCode === 403)) throw err;
        this.log.info({ namespace: this.defaultNamespace, reason: errorMessage(err) }, 'not allowed to watch cluster-wide; watching namespaces on demand');
        await this.onDemand.watchDefault();
      } finally {
        this.syncingSet = undefined;
      }
      await namespacesSynced;
    } catch (err) {
      await namespaces.stop();
      throw err;
    } finally {
      clearInterval(progress);
      this.syncingNamespaces = undefined;
    }
    const ms = Date.now() - startedAt;
    const counts = Object.fromEntries(this.sets().flatMap((set) => set.all().map((inf) => [kindOf(inf.path), inf.size] as const)));
    if (ms >= progressMs) this.log.info({ ...counts, ms }, 'cluster cache synced');
    else this.log.debug({ ...counts, ms }, 'cluster cache synced');
  }

  private get deadlines(): WatchDeadlines {
    return this.watchOptions.deadlines ?? WATCH_DEADLINES;
  }

  private newWatchSet(namespace: string | undefined, hooks?: InformerHooks): WatchSet {
    return new WatchSet(this.api, this.log, namespace, this.index, this.deadlines, { ...this.watchOptions, watchPods: this.watchPods }, hooks);
  }

  /** A start-up that takes more than a moment says so: objects listed per kind, of how many. */
  private logProgress(pacer: ProgressPacer): void {
    for (const [kind, p] of Object.entries(this.syncProgress())) {
      if (!pacer.due(kind, p)) continue;
      this.log.info(
        { kind, listed: p.listed, ...(p.total !== undefined ? { of: p.total } : {}), ...(p.waiting ? { waitingOnServer: true } : {}) },
        'syncing the cluster cache',
      );
    }
  }

  /** Per watch path still on its first list: objects received so far, and the total when known. */
  private syncProgress(): Record<string, SyncProgress> {
    const out: Record<string, SyncProgress> = {};
    const informers = [...this.sets(), ...(this.syncingSet ? [this.syncingSet] : [])].flatMap((set) => set.all());
    if (this.syncingNamespaces) informers.push(this.syncingNamespaces as never);
    for (const inf of informers) {
      const p = inf.progress;
      if (p) out[watchLabel(inf.path)] = p;
    }
    return out;
  }

  async stop(): Promise<void> {
    this.stopListening?.();
    this.stopListening = undefined;
    // Namespaces still on their first list are stopped too (waiting for that list could take for
    // ever while the API server fails); their waiters are told the cache stopped.
    const sets = [this.clusterWide, this.syncingSet, ...this.onDemand.clear()];
    await Promise.all([...sets.map((s) => s?.stop()), this.namespaces?.stop(), this.syncingNamespaces?.stop()]);
    // A later start() decides its scope afresh (the rights may have changed): nothing stopped is
    // kept to serve, or be preferred, meanwhile.
    this.clusterWide = undefined;
    this.namespaces = undefined;
    this.index.invalidate();
    this.pods.clear();
    closeAgents(this.api);
  }

  /**
   * In per-namespace mode, start watching a namespace a request names (once). A new one costs a
   * token of the look-up budget; none left → OverloadedError, without an API request.
   */
  async ensureNamespace(namespace: string): Promise<void> {
    if (this.clusterWide) return;
    try {
      await this.onDemand.ensure(namespace);
    } catch (err) {
      // The 401 made the API connection drop the credential (a token rotated or revoked, an exec
      // plugin's): one more attempt runs with a fresh one, as a tunnel's does, not the client's.
      if (!(err instanceof ApiStatusError && err.statusCode === 401)) throw err;
      await this.onDemand.ensure(namespace);
    }
  }

  /** A request resolved to a pod in this namespace: keep watching it while it is used. */
  noteServed(namespace: string): void {
    this.onDemand.noteServed(namespace);
  }

  /** Every namespace's name, when the namespace list may be watched (the PAC's "svc.ns" names). */
  knownNamespaces(): string[] | undefined {
    return this.namespaces ? [...this.namespaces.list()].map((n) => n.name) : undefined;
  }

  /** true/false when we can tell; undefined when namespaces cannot be listed and it is not watched. */
  namespaceExists(namespace: string): boolean | undefined {
    if (this.namespaces) return this.namespaces.get(namespace) !== undefined;
    return this.onDemand.has(namespace) ? true : undefined;
  }

  get lookup(): ClusterIndex {
    return this.index;
  }

  status(): CacheStatus {
    const watches: Record<string, WatchState> = {};
    for (const set of [...this.sets(), ...(this.syncingSet ? [this.syncingSet] : [])]) for (const inf of set.all()) watches[inf.path] = inf.status;
    const namespaces = this.namespaces ?? this.syncingNamespaces;
    if (namespaces) watches[namespaces.path] = namespaces.status;
    const syncing = this.syncProgress();
    const objects: Record<string, number> = {};
    for (const set of this.sets()) for (const inf of set.all()) objects[kindOf(inf.path)] = (objects[kindOf(inf.path)] ?? 0) + inf.size;
    if (this.namespaces) objects.namespaces = this.namespaces.size;
    return {
      scope: this.clusterWide || this.syncingSet ? 'cluster' : 'namespaces',
      namespaces: this.clusterWide || this.syncingSet ? [] : this.onDemand.names(),
      watches,
      objects,
      ...(Object.keys(syncing).length ? { syncing } : {}),
    };
  }

  /**
   * After a pause (a laptop asleep): pooled API connections are dropped (they may be dead without
   * a sign) and every watch watches again now from where it was; Pod look-up answers from before
   * are forgotten. Resolves once every watch is back, or after `maxMs`.
   */
  afterPause(maxMs: number): Promise<void> {
    const informers = [...this.sets().flatMap((set) => set.all()), ...(this.namespaces ? [this.namespaces] : [])];
    const back = Promise.all(informers.map((i) => i.rewatch()));
    closeAgents(this.api);
    this.pods.clear();
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, maxMs);
      timer.unref();
    });
    return Promise.race([back.then(() => undefined), bound]).finally(() => clearTimeout(timer));
  }

  /** The watches retrying now, each with its last error (a route's health: routes/guest-cluster/health.ts). */
  failingWatches(): Array<{ path: string; error: string }> {
    // A namespace besides the context's that refuses us (deleted with its RoleBinding) is dropped
    // soon (on-demand-namespaces.ts): it is not the route's health.
    const refusedElsewhere = (set: WatchSet) =>
      set.namespace !== this.defaultNamespace &&
      set.all().some((i) => i.status === 'retrying' && i.lastError instanceof ApiStatusError && i.lastError.statusCode === 403);
    const sets = this.clusterWide ? [this.clusterWide] : this.onDemand.sets().filter((set) => !refusedElsewhere(set));
    const informers = [...sets.flatMap((set) => set.all()), ...(this.namespaces ? [this.namespaces] : [])];
    return informers.filter((i) => i.status === 'retrying').map((i) => ({ path: i.path, error: i.lastError ? errorMessage(i.lastError) : 'failing' }));
  }

  private sets(): WatchSet[] {
    if (this.clusterWide) return [this.clusterWide];
    return this.onDemand.sets();
  }
}
