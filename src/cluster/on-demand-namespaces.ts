// Per-namespace watching, for a user without cluster-wide list/watch: the context's namespace, and
// any namespace a request names, each watched (Services, EndpointSlices) in a slot of its own.
// Bounded so that a client cannot make the proxy watch without limit, hammer the API server with
// lists, or keep the slots full of namespaces nobody reaches a pod in (cache.ts uses it).
import type { Logger } from '../core/log.js';
import { OverloadedError } from '../core/errors.js';
import { TokenBucket } from '../core/token-bucket.js';
import { ApiStatusError } from './api.js';
import type { InformerHooks } from './watch-options.js';
import type { WatchSet } from './watch-set.js';

export interface OnDemandLimits {
  /** Namespaces watched on demand at most (each costs two watches: Services, EndpointSlices). */
  maxNamespaces: number;
  /** At the limit, a namespace that served streams but has been unused this long makes room. */
  evictIdleMs: number;
  /**
   * A namespace that served streams and no request has named this long is no longer watched,
   * limit or not: the watches held follow what is used now, not every namespace reached since start.
   */
  idleReleaseMs: number;
  /** A namespace watched for a request that never led to a pod is dropped after this long. */
  unservedReleaseMs: number;
  /**
   * A namespace RBAC refused is refused again without asking for this long: short, so that a
   * RoleBinding granted meanwhile works within seconds; asking again costs two lists.
   */
  forbiddenTtlMs: number;
  /**
   * A namespace whose watches have been refused (403) this long, having worked before, is no
   * longer watched: deleted (its RoleBinding with it) or access revoked. Long enough that the
   * refusals of an API server still loading its RBAC after a restart do not count.
   */
  revokedReleaseMs: number;
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
  idleReleaseMs: 30 * 60_000,
  unservedReleaseMs: 30_000,
  forbiddenTtlMs: 5_000,
  revokedReleaseMs: 30_000,
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

export class OnDemandNamespaces {
  private readonly slots = new Map<string, Slot>();
  private readonly forbidden = new Map<string, { until: number; err: unknown }>();
  private readonly lookups: TokenBucket;
  private refusedLookups = 0;
  /** Runs while a namespace other than the context's is kept for having served (releaseIdle). */
  private idleSweep?: NodeJS.Timeout;
  private nextRefusalLog = 0;

  constructor(
    private readonly log: Logger,
    private readonly defaultNamespace: string,
    private readonly limits: OnDemandLimits,
    private readonly newWatchSet: (namespace: string, hooks: InformerHooks) => WatchSet,
    /** The set of watched namespaces changed: the index must look again. */
    private readonly changed: () => void,
  ) {
    this.lookups = new TokenBucket({ ratePerSecond: limits.lookupsPerSecond, burst: limits.lookupBurst });
  }

  /** Namespaces watched or on their first list. */
  names(): string[] {
    return [...this.slots.keys()];
  }

  has(namespace: string): boolean {
    return this.slots.has(namespace);
  }

  /** The watch sets whose first list is in. */
  sets(): WatchSet[] {
    return [...this.slots.values()].flatMap((s) => (s.set ? [s.set] : []));
  }

  /** Forgets every slot; returns their watch sets (first lists included) for the caller to stop. */
  clear(): WatchSet[] {
    clearInterval(this.idleSweep);
    this.idleSweep = undefined;
    for (const slot of this.slots.values()) clearTimeout(slot.releaseTimer);
    const watching = [...this.slots.values()].map((s) => s.watching);
    this.slots.clear();
    return watching;
  }

  /** Watches the default namespace (start-up without cluster-wide permission); resolves after its first list. */
  async watchDefault(): Promise<void> {
    await this.watch(this.defaultNamespace, Date.now()).pending;
  }

  /**
   * Starts watching a namespace a request names (once). A new one costs a
   * token of the look-up budget; none left → OverloadedError, without an API request.
   */
  async ensure(namespace: string): Promise<void> {
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
    if (namespace !== this.defaultNamespace && !this.idleSweep) {
      this.idleSweep = setInterval(() => this.releaseIdle(), this.limits.idleReleaseMs / 4);
      this.idleSweep.unref();
    }
  }

  /** Drops the namespaces that served but have not been named for idleReleaseMs (never the context's). */
  private releaseIdle(): void {
    const now = Date.now();
    let kept = false;
    for (const [namespace, slot] of this.slots) {
      if (namespace === this.defaultNamespace || !slot.served || !slot.set) continue;
      if (now - slot.lastUsed < this.limits.idleReleaseMs) kept = true;
      else {
        void this.release(namespace, slot);
        this.log.info({ namespace, idleMs: now - slot.lastUsed }, 'stopped watching a namespace no request named lately');
      }
    }
    if (kept) return;
    clearInterval(this.idleSweep);
    this.idleSweep = undefined;
  }

  private watch(namespace: string, now: number): Slot {
    const set = this.newWatchSet(namespace, { refused: (err, forMs) => this.refused(namespace, slot, err, forMs) });
    const slot: Slot = { watching: set, pending: set.start().then(() => set), lastUsed: now, served: namespace === this.defaultNamespace };
    this.slots.set(namespace, slot);
    slot.pending.then(
      () => {
        if (this.slots.get(namespace) !== slot) {
          // Dropped (cache stopping) while its first list ran: what it listed leaves the index too.
          this.changed();
          return void set.stop();
        }
        slot.set = set;
        this.changed();
        this.log.info({ namespace }, 'watching namespace');
        if (!slot.served) {
          slot.releaseTimer = setTimeout(() => void this.releaseUnserved(namespace, slot), this.limits.unservedReleaseMs);
          slot.releaseTimer.unref();
        }
      },
      (err: unknown) => {
        if (this.slots.get(namespace) === slot) this.slots.delete(namespace);
        // The built index took its events as they came (a Service listed before the slices were
        // refused): rebuilt without it, or its ClusterIPs would stay claimed with no endpoints.
        this.changed();
        if (err instanceof ApiStatusError && err.statusCode === 403) this.rememberForbidden(namespace, err);
      },
    );
    return slot;
  }

  /**
   * A watched namespace keeps refusing us: it was deleted (its RoleBinding with it) or access was
   * revoked. Watched on, its watches would retry for ever, and the route show degraded for it.
   * The context's namespace stays: its failure is the route's to show.
   */
  private refused(namespace: string, slot: Slot, err: Error, forMs: number): void {
    if (namespace === this.defaultNamespace || forMs < this.limits.revokedReleaseMs || this.slots.get(namespace) !== slot) return;
    void this.release(namespace, slot);
    this.rememberForbidden(namespace, err);
    this.log.info({ namespace, reason: err.message }, 'stopped watching a namespace that refuses us now (deleted, or access revoked)');
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
      this.log.warn(
        { refused: this.refusedLookups, perSecond: this.limits.lookupsPerSecond, burst: this.limits.lookupBurst },
        'clients name new namespaces faster than the look-up budget allows; refusing those requests',
      );
      this.refusedLookups = 0;
      this.nextRefusalLog = now + REFUSAL_LOG_INTERVAL_MS;
    }
    return new OverloadedError(
      `not watching namespace "${namespace}" now: too many new namespaces named at once (over ${this.limits.lookupsPerSecond}/s, no cluster-wide list/watch permission); try again in a moment`,
    );
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
    this.changed();
    await slot.set?.stop();
  }
}
