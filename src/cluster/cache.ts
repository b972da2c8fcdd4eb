import type { Logger } from '../core/log.js';
import { errorMessage, OverloadedError } from '../core/errors.js';
import { TokenBucket } from '../core/token-bucket.js';
import { ApiStatusError, type ApiConnection } from './api.js';
import { ResilientInformer, WATCH_DEADLINES, type SyncProgress, type WatchDeadlines, type WatchState } from './informer.js';
import { closeAgents } from './list-watch.js';
import { PodLookup, POD_LOOKUP_LIMITS } from './pod-lookup.js';
import { normalizeIp } from '../core/ip.js';
import { slimNamespace, type SlimNamespace, type SlimPod } from './slim.js';
import { ClusterIndex } from './index.js';
import { WatchSet } from './watch-set.js';
import { kindOf, PROGRESS_LOG_INTERVAL_MS, watchLabel, type CacheStatus, type CacheWatchOptions } from './cache-status.js';

export { kindOf, watchLabel, type CacheStatus, type CacheWatchOptions } from './cache-status.js';

export interface OnDemandLimits {
  /** Namespaces watched on demand at most (each costs two watches: Services, EndpointSlices). */
  maxNamespaces: number;
  /** At the limit, a namespace that served streams but has been unused this long makes room. */
  evictIdleMs: number;
  /** A namespace watched for a request that never led to a pod is dropped after this long. */
  unservedReleaseMs: number;
  /** A namespace RBAC refused is refused again without asking for this long. */
  forbiddenTtlMs: number;
  /** New namespace look-ups (each two lists and watches) allowed per second on average… */
  lookupsPerSecond: number;
  /** …and at once. */
  lookupBurst: number;
}

/**
 * Without cluster-wide RBAC, any namespace a client names costs two list+watches: bounded here
 * so a client cannot make the proxy watch without limit, hammer the API server with lists (allowed
 * or not: every new name costs a token, whatever the answer), or keep the slots full of
 * namespaces nobody reaches a pod in.
 */
export const ON_DEMAND_LIMITS: OnDemandLimits = {
  maxNamespaces: 64,
  evictIdleMs: 10 * 60_000,
  unservedReleaseMs: 30_000,
  forbiddenTtlMs: 30_000,
  lookupsPerSecond: 2,
  lookupBurst: 8,
};

/** Refused look-ups are logged at most once per this long, with how many there were. */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

/** One on-demand namespace: its watches, and whether a request ever reached a pod through them. */
interface Slot {
  /** The namespace's watches, from the start (stop() must reach them during their first list). */
  watching: WatchSet;
  pending: Promise<WatchSet>;
  /** Set once the first list is in. */
  set?: WatchSet;
  lastUsed: number;
  /** A stream resolved to a pod here: the slot is kept while used (else it is released soon). */
  served: boolean;
  releaseTimer?: NodeJS.Timeout;
}

/**
 * The proxy's picture of the cluster: Services, EndpointSlices, Pods and Namespaces, watched
 * cluster-wide when RBAC allows, else per namespace (the context's, plus any a request names).
 * Once warm, resolving a destination costs no API request.
 */
export class ClusterCache {
  private clusterWide?: WatchSet;
  private readonly slots = new Map<string, Slot>();
  private namespaces?: ResilientInformer<SlimNamespace>;
  private readonly index = new ClusterIndex(() => this.sets());
  private readonly forbidden = new Map<string, { until: number; err: unknown }>();
  private readonly lookups: TokenBucket;
  private refusedLookups = 0;
  private nextRefusalLog = 0;
  /** While start() runs: the cluster-wide set and the namespace list, still on their first list. */
  private syncingSet?: WatchSet;
  private syncingNamespaces?: ResilientInformer<SlimNamespace>;
  private readonly pods: PodLookup;

  constructor(
    private readonly api: ApiConnection,
    private readonly log: Logger,
    readonly defaultNamespace: string,
    private readonly limits: OnDemandLimits = ON_DEMAND_LIMITS,
    private readonly watchOptions: CacheWatchOptions = {},
  ) {
    this.lookups = new TokenBucket({ ratePerSecond: limits.lookupsPerSecond, burst: limits.lookupBurst });
    this.pods = new PodLookup(api, log, (pod) => this.index.onPodGone?.(pod.namespace, pod.name, pod.uid), watchOptions.podLookup ?? POD_LOOKUP_LIMITS);
  }

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
    // EndpointSlice endpoint that lists it, by the pod's name.
    const ref = this.index.endpointPod(n);
    if (!ref || (namespace !== undefined && ref.namespace !== namespace)) return undefined;
    const pod = await this.pods.byName(ref.namespace, ref.name);
    return pod?.ips.includes(n) ? pod : undefined;
  }

  /** A running pod by name (watched, or looked up). */
  async findPod(namespace: string, name: string): Promise<SlimPod | undefined> {
    if (this.watchPods) return this.index.pod(namespace, name);
    return this.pods.byName(namespace, name);
  }

  /** Lists everything once; cluster-wide if allowed, else the default namespace only. */
  async start(): Promise<void> {
    const startedAt = Date.now();
    // The namespace list runs alongside: it only decides which names are worth a look-up.
    const namespaces = new ResilientInformer(this.api, '/api/v1/namespaces', this.log, () => undefined, slimNamespace, this.deadlines, this.watchOptions);
    this.syncingNamespaces = namespaces;
    const namespacesSynced = namespaces.start().then(
      () => {
        if (this.syncingNamespaces === namespaces) this.namespaces = namespaces;
      },
      (err: unknown) => this.log.info({ reason: errorMessage(err) }, 'not allowed to list namespaces; only watched namespaces count as known'),
    );
    const progressMs = this.watchOptions.progressIntervalMs ?? PROGRESS_LOG_INTERVAL_MS;
    const progress = setInterval(() => this.logProgress(), progressMs);
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
        await this.watch(this.defaultNamespace, Date.now()).pending;
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

  private newWatchSet(namespace: string | undefined): WatchSet {
    return new WatchSet(this.api, this.log, namespace, this.index, this.deadlines, { ...this.watchOptions, watchPods: this.watchPods });
  }

  /** A start-up that takes more than a moment says so: objects listed per kind, of how many. */
  private logProgress(): void {
    for (const [kind, p] of Object.entries(this.syncProgress())) {
      this.log.info({ kind, listed: p.listed, ...(p.total !== undefined ? { of: p.total } : {}) }, 'syncing the cluster cache');
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
    for (const slot of this.slots.values()) clearTimeout(slot.releaseTimer);
    // Slots still on their first list are stopped too (waiting for that list could take for ever
    // while the API server fails); their waiters are told the cache stopped.
    const sets = [this.clusterWide, this.syncingSet, ...[...this.slots.values()].map((s) => s.watching)];
    this.slots.clear();
    await Promise.all([...sets.map((s) => s?.stop()), this.namespaces?.stop(), this.syncingNamespaces?.stop()]);
    this.pods.clear();
    closeAgents(this.api);
  }

  /**
   * In per-namespace mode, start watching a namespace a request names (once). A new one costs a
   * token of the look-up budget; none left → OverloadedError, without an API request.
   */
  async ensureNamespace(namespace: string): Promise<void> {
    if (this.clusterWide) return;
    const now = Date.now();
    const refused = this.forbidden.get(namespace);
    if (refused && refused.until > now) throw refused.err;
    let slot = this.slots.get(namespace);
    if (!slot) {
      if (!this.lookups.take()) throw this.overBudget(namespace, now);
      if (this.slots.size >= this.limits.maxNamespaces) await this.makeRoom(now);
      slot = this.watch(namespace, now);
    }
    slot.lastUsed = now;
    await slot.pending;
  }

  /** A request resolved to a pod in this namespace: keep watching it while it is used. */
  noteServed(namespace: string): void {
    const slot = this.slots.get(namespace);
    if (!slot) return;
    slot.served = true;
    slot.lastUsed = Date.now();
    clearTimeout(slot.releaseTimer);
  }

  private watch(namespace: string, now: number): Slot {
    const set = this.newWatchSet(namespace);
    const slot: Slot = { watching: set, pending: set.start().then(() => set), lastUsed: now, served: namespace === this.defaultNamespace };
    this.slots.set(namespace, slot);
    slot.pending.then(
      () => {
        if (this.slots.get(namespace) !== slot) return void set.stop(); // dropped (cache stopping) while its first list ran
        slot.set = set;
        this.index.invalidate();
        this.log.info({ namespace }, 'watching namespace');
        if (!slot.served) {
          slot.releaseTimer = setTimeout(() => void this.releaseUnserved(namespace, slot), this.limits.unservedReleaseMs);
          slot.releaseTimer.unref();
        }
      },
      (err: unknown) => {
        if (this.slots.get(namespace) === slot) this.slots.delete(namespace);
        if (err instanceof ApiStatusError && err.statusCode === 403) this.rememberForbidden(namespace, err);
      },
    );
    return slot;
  }

  private rememberForbidden(namespace: string, err: unknown): void {
    const now = Date.now();
    if (this.forbidden.size >= 10_000) for (const [ns, f] of this.forbidden) if (f.until <= now) this.forbidden.delete(ns);
    if (this.forbidden.size >= 10_000) this.forbidden.clear();
    this.forbidden.set(namespace, { until: now + this.limits.forbiddenTtlMs, err });
  }

  private overBudget(namespace: string, now: number): OverloadedError {
    this.refusedLookups++;
    if (now >= this.nextRefusalLog) {
      this.log.warn({ refused: this.refusedLookups, perSecond: this.limits.lookupsPerSecond, burst: this.limits.lookupBurst }, 'clients name new namespaces faster than the look-up budget allows; refusing those requests');
      this.refusedLookups = 0;
      this.nextRefusalLog = now + REFUSAL_LOG_INTERVAL_MS;
    }
    return new OverloadedError(`not watching namespace "${namespace}" now: too many new namespaces named at once (over ${this.limits.lookupsPerSecond}/s, no cluster-wide list/watch permission); try again in a moment`);
  }

  /**
   * At the limit: drop a namespace that never served a stream (oldest first), else one that did
   * but has been unused long enough. Namespaces still on their first list are never dropped.
   */
  private async makeRoom(now: number): Promise<void> {
    let victim: string | undefined;
    let victimSlot: Slot | undefined;
    const better = (s: Slot) => !victimSlot || (s.served === victimSlot.served ? s.lastUsed < victimSlot.lastUsed : !s.served);
    for (const [ns, slot] of this.slots) {
      if (ns === this.defaultNamespace || !slot.set) continue;
      if (slot.served && now - slot.lastUsed < this.limits.evictIdleMs) continue;
      if (better(slot)) [victim, victimSlot] = [ns, slot];
    }
    if (victim === undefined || !victimSlot) {
      throw new OverloadedError(`already watching ${this.slots.size} namespaces on demand, all in use (no cluster-wide list/watch permission)`);
    }
    await this.release(victim, victimSlot);
    this.log.info({ namespace: victim, servedStreams: victimSlot.served }, 'stopped watching a namespace to make room');
  }

  private async releaseUnserved(namespace: string, slot: Slot): Promise<void> {
    if (slot.served || this.slots.get(namespace) !== slot) return;
    await this.release(namespace, slot);
    this.log.debug({ namespace }, 'stopped watching a namespace no stream reached a pod in');
  }

  private async release(namespace: string, slot: Slot): Promise<void> {
    clearTimeout(slot.releaseTimer);
    if (this.slots.get(namespace) === slot) this.slots.delete(namespace);
    this.index.invalidate();
    await slot.set?.stop();
  }

  /** Every namespace's name, when the namespace list may be watched (the PAC's "svc.ns" names). */
  knownNamespaces(): string[] | undefined {
    return this.namespaces ? [...this.namespaces.list()].map((n) => n.name) : undefined;
  }

  /** true/false when we can tell; undefined when namespaces cannot be listed and it is not watched. */
  namespaceExists(namespace: string): boolean | undefined {
    if (this.namespaces) return this.namespaces.get(namespace) !== undefined;
    return this.slots.has(namespace) ? true : undefined;
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
    return {
      scope: this.clusterWide || this.syncingSet ? 'cluster' : 'namespaces',
      namespaces: this.clusterWide || this.syncingSet ? [] : [...this.slots.keys()],
      watches,
      ...(Object.keys(syncing).length ? { syncing } : {}),
    };
  }

  private sets(): WatchSet[] {
    if (this.clusterWide) return [this.clusterWide];
    return [...this.slots.values()].flatMap((s) => (s.set ? [s.set] : []));
  }
}
