// Our list+watch client (client-go's Reflector, staging/src/k8s.io/client-go/tools/cache/reflector.go,
// cut to what the proxy needs). Every object is slimmed (cluster/slim.ts) the moment its JSON is
// parsed; the informer's store holds only slim records. A (re)list is the streaming watch-list
// (KEP-3157: sendInitialEvents=true, resourceVersionMatch=NotOlderThan, ended by the
// "k8s.io/initial-events-end" bookmark) where the API server supports it, else a paged LIST
// (limit + continue); either way no whole-cluster list is in memory at once. Watches resume from the
// last resourceVersion seen (events and bookmarks); 410 Gone relists (watch-recovery.ts).
import type { Logger } from '../core/log.js';
import { errorMessage } from '../core/errors.js';
import { ApiStatusError, type ApiConnection } from './api.js';
import { InformerStore } from './informer-store.js';
import type { WatchEvent } from './index.js';
import { apiGet, listAll, streamEvents, type RawWatchEvent } from './list-watch.js';
import { SyncProgressTracker, type SyncProgress } from './sync-progress.js';
import type { Slim } from './slim.js';
import { ApiReachability } from './api-reachability.js';
import { HEALTHY_WATCH_MS, WatchRecovery } from './watch-recovery.js';
import { WakeableWait } from './wakeable-wait.js';
import { InitialEvents } from './initial-events.js';
import { mayWatchList, watchListAccepted, watchListRefused } from './watch-list-support.js';
import { WATCH_DEADLINES, WatchStoppedError, type InformerHooks, type InformerOptions, type WatchDeadlines } from './watch-options.js';
import { monotonicMs } from '../core/clock.js';
import { youngGenerationHold } from '../core/young-generation.js';

export type WatchState = 'starting' | 'synced' | 'retrying' | 'stopped';
export type { SyncProgress } from './sync-progress.js';
export { WATCH_DEADLINES, type InformerHooks, type InformerOptions, type WatchDeadlines } from './watch-options.js';

/** A watch the server ends sooner than this is followed by a pause of about as long. */
const MIN_WATCH_MS = 1_000;
/** After a resumed watch's headers, its pending events are in this soon (or it had none). */
const RESUMED_EVENTS_MS = 200;
/** Objects per LIST page (client-go's pager default). */
export const PAGE_SIZE = 500;

/**
 * A list+watch of one resource path that keeps going: what follows an end or a failure is
 * watch-recovery.ts's decision (resume, relist, back off, wait for the server), each change of
 * state logged once; a refusal on the first sync is reported to the owner instead.
 */
export class ResilientInformer<T extends Slim> {
  private readonly store: InformerStore<T>;
  private state: WatchState = 'starting';
  private readonly recovery = new WatchRecovery();
  /** The first (re)list is in: refusals no longer stop the watch. */
  private everSynced = false;
  private readonly stopOn: readonly number[];
  private failuresSinceSync = 0;
  /** Since when (monotonic) a watch that had synced is refused (403), every attempt in a row. */
  private refusedSince?: number;
  private controller?: AbortController;
  private readonly waits = new WakeableWait();
  /** The watch was cut by our deadline (or a rewatch): its error is expected. */
  private cutByDeadline = false;
  /** The error that ended the last watch stream after its response came (a lost connection). */
  private lostStream?: unknown;
  /** A list or watch request is under way (what rewatch() cuts). */
  private inFlight = false;
  /** rewatch() callers waiting for the watch to be back. */
  private readonly backWaiters: Array<() => void> = [];
  /** The watch-list under way has delivered its initial events (it goes on as the watch). */
  private initialEventsDone = false;
  private readonly syncing: SyncProgressTracker;
  /** Set while a (re)list runs: the young generation stays small meanwhile (core/young-generation.ts). */
  private releaseYoungGeneration?: () => void;
  private readonly timeoutSeconds: number;
  private readonly firstSync: Promise<void>;
  private resolveFirstSync!: () => void;
  private rejectFirstSync!: (err: Error) => void;
  lastError?: Error;

  constructor(
    private readonly api: ApiConnection,
    readonly path: string,
    private readonly log: Logger,
    onChange: (event: WatchEvent, obj: T, previous?: T) => void,
    private readonly slim: (raw: Record<string, any>) => T | undefined,
    private readonly deadlines: WatchDeadlines = WATCH_DEADLINES,
    private readonly options: InformerOptions = {},
    private readonly hooks: InformerHooks = {},
  ) {
    this.stopOn = hooks.stopOn ?? [401, 403];
    this.firstSync = new Promise((resolve, reject) => {
      this.resolveFirstSync = resolve;
      this.rejectFirstSync = reject;
    });
    this.firstSync.catch(() => undefined);
    this.syncing = new SyncProgressTracker(api, path, deadlines.headersTimeoutMs);
    this.store = new InformerStore(onChange, slim);
    this.timeoutSeconds = Math.max(1, Math.round(deadlines.watchTimeoutSeconds * (1 + Math.random())));
  }

  get status(): WatchState {
    return this.state;
  }

  /** A method, not a field read: stop() may have run during any await. */
  private stopped(): boolean {
    return this.state === 'stopped';
  }

  /** While a (re)list runs: objects received so far and the total when known. */
  get progress(): SyncProgress | undefined {
    return this.syncing.progress;
  }

  get size(): number {
    return this.store.size;
  }

  /** Starts listing and watching; resolves once the first list is in, rejects if it is refused. */
  start(): Promise<void> {
    void this.loop();
    return this.firstSync;
  }

  list(): Iterable<T> {
    return this.store.list();
  }

  /** By key: "namespace/name" (the name alone for cluster-scoped objects). */
  get(key: string): T | undefined {
    return this.store.get(key);
  }

  async stop(): Promise<void> {
    this.state = 'stopped';
    this.back();
    this.controller?.abort();
    this.waits.wake();
    this.syncing.end();
    this.endHold();
    // Whoever waits for a first sync that will now never come is told so (no-op once synced).
    this.rejectFirstSync(new WatchStoppedError(this.path));
  }

  private async loop(): Promise<void> {
    while (!this.stopped()) {
      const resuming = this.store.resourceVersion !== undefined;
      const startedAt = monotonicMs();
      try {
        // A paged LIST is no watch: the watch from its resourceVersion follows at once.
        if (!resuming && !(await this.relist())) continue;
        if (resuming) await this.watch({ resourceVersion: this.store.resourceVersion });
        // The server ended the watch (timeoutSeconds, restart, load shedding): resume at once —
        // unless it ends them as soon as they start (a proxy in between?): then not in a hot loop.
        const delay = this.recovery.afterEnd(monotonicMs() - startedAt, MIN_WATCH_MS);
        if (this.state === 'synced') this.log.debug({ path: this.path, inMs: delay }, 'watch ended by the API server; resuming');
        if (delay > 0) await this.waits.delay(delay);
      } catch (err) {
        this.endHold();
        if (this.stopped()) return;
        if (this.cutByDeadline) {
          this.cutByDeadline = false;
          continue;
        }
        const ranMs = monotonicMs() - startedAt;
        if (err === this.lostStream && ranMs >= HEALTHY_WATCH_MS) {
          // A watch that ran and then lost its connection (a balancer's idle timeout, a reset) has
          // ended, as client-go's reflector takes it (net.IsProbableEOF): resumed at once, paced
          // only if it keeps happening at once; a server that is gone fails the resume instead.
          const delay = this.recovery.afterEnd(ranMs, MIN_WATCH_MS);
          this.log.debug({ path: this.path, error: errorMessage(err), inMs: delay }, 'watch connection lost; resuming');
          if (delay > 0) await this.waits.delay(delay);
          continue;
        }
        this.recovery.watchRan(ranMs);
        const next = this.recovery.afterError(err, { starting: !this.everSynced, resuming: resuming || this.initialEventsDone, stopOn: this.stopOn });
        const error = err instanceof Error ? err : new Error(errorMessage(err));
        if (next.kind === 'relist') {
          if (next.failed) {
            this.lastError = error;
            this.noteFailure(error, next.delayMs);
            if (this.stopped()) return; // its owner stopped it on the refusal (hooks.refused)
          } else this.log.debug({ path: this.path, inMs: next.delayMs }, 'resourceVersion too old (410 Gone); listing again');
          this.store.resourceVersion = undefined;
          await this.waits.delay(next.delayMs);
          continue;
        }
        this.lastError = error;
        if (next.kind === 'stop') {
          // Refused on the first sync (permissions, not served): retrying will not heal it.
          this.syncing.end();
          this.rejectFirstSync(error);
          this.state = 'stopped';
          return;
        }
        this.noteFailure(error, next.delayMs);
        if (this.stopped()) return;
        if (next.untilReachable) await this.waits.untilServerBack(this.api, next.delayMs);
        else await this.waits.delay(next.delayMs);
      }
    }
  }

  /** A fresh picture; true when it came by a watch-list, which went on as the watch until now. */
  private async relist(): Promise<boolean> {
    this.releaseYoungGeneration ??= youngGenerationHold.hold();
    if (this.options.watchList !== false && mayWatchList(this.api)) {
      let initialEvents = 0;
      try {
        await this.watchList(() => initialEvents++);
        return true;
      } catch (err) {
        // Stopped; refused for permissions (a LIST would be refused the same); or the initial
        // events were in and this is the watch that followed ending (resumed from its
        // resourceVersion, paced, as any watch): no fallback.
        if (this.stopped() || this.initialEventsDone || (err instanceof ApiStatusError && [401, 403, ...this.stopOn].includes(err.statusCode))) throw err;
        const unsupported = err instanceof ApiStatusError && (err.statusCode === 400 || err.statusCode === 422) && initialEvents === 0;
        if (unsupported) {
          watchListRefused(this.api);
          this.log.debug({ path: this.path, reason: err.message }, 'the API server does not stream initial events (watch-list); listing in pages');
        } else {
          // Any other failure: this relist goes on as a paged LIST, as client-go's reflector falls
          // back ("making progress is better than deadlocking", reflector.go ListAndWatch) — a
          // watch-list that times out, or loses its query to a proxy, must not block the sync.
          this.log.debug({ path: this.path, error: errorMessage(err), initialEvents }, 'watch-list failed; listing in pages this time');
          this.cutByDeadline = false;
        }
      }
    }
    await this.listPaged();
    return false;
  }

  private async watchList(counted: () => void): Promise<void> {
    this.initialEventsDone = false;
    const initial = new InitialEvents(
      this.slim,
      (n) => this.syncing.listed(n),
      (fresh, resourceVersion) => {
        this.initialEventsDone = true;
        if (watchListAccepted(this.api)) this.log.debug({ path: this.path }, 'the API server streams initial events (watch-list) again; relists use it');
        this.replace(fresh, resourceVersion, 'watch-list');
      },
    );
    // The watch-list says nothing of the total: a sync that takes a while asks for it once.
    this.syncing.begin(true);
    await this.watch({ sendInitialEvents: 'true', resourceVersionMatch: 'NotOlderThan' }, (ev) => {
      if (initial.isComplete) return false;
      counted();
      return initial.take(ev);
    });
    if (!initial.isComplete) throw new Error('the watch-list ended before its initial events were complete');
  }

  private async listPaged(): Promise<void> {
    this.syncing.begin(false);
    const controller = new AbortController();
    this.controller = controller;
    const { items, resourceVersion } = await listAll(this.api, this.path, this.slim, {
      pageSize: this.options.pageSize ?? PAGE_SIZE,
      signal: controller.signal,
      headersTimeoutMs: this.deadlines.headersTimeoutMs,
      onPage: (listed, total) => this.syncing.listed(listed, total),
      onRestart: (listed) => this.log.debug({ path: this.path, listed }, 'list continue token expired (410); listing again from the start'),
      onWait: (seconds) => this.syncing.waitFor(seconds * 1000),
    });
    this.replace(items, resourceVersion, 'paged list');
  }

  /**
   * One watch request, from `query`; resolves when the server ends it. `initial` sees each event
   * first (the watch-list's initial events); it returns true for events it consumed.
   */
  private async watch(query: Record<string, string | undefined>, initial?: (ev: RawWatchEvent) => boolean): Promise<void> {
    const controller = new AbortController();
    this.controller = controller;
    const params = new URLSearchParams({ watch: '1', allowWatchBookmarks: 'true', timeoutSeconds: String(this.timeoutSeconds) });
    for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, v);
    const path = `${this.path}${this.path.includes('?') ? '&' : '?'}${params.toString()}`;
    this.inFlight = true;
    let res: Awaited<ReturnType<typeof apiGet>>;
    try {
      res = await apiGet(this.api, path, controller.signal, this.deadlines.headersTimeoutMs, true);
    } catch (err) {
      this.inFlight = false;
      throw err;
    }
    // A resumed watch the server took: the informer is whole again (a watch-list is once its
    // initial events are in) — once its body proves readable: its first event, its end, or
    // RESUMED_EVENTS_MS without a failure. Declared at the headers, a server (or front) whose
    // every watch fails on its body logged "recovered" and a new warning at each retry.
    let recoverTimer: NodeJS.Timeout | undefined;
    if (!initial && this.state === 'retrying') {
      recoverTimer = setTimeout(() => {
        recoverTimer = undefined;
        if (this.state === 'retrying') this.recovered();
      }, RESUMED_EVENTS_MS);
      recoverTimer.unref();
    }
    const readable = (): void => {
      if (!recoverTimer) return;
      clearTimeout(recoverTimer);
      recoverTimer = undefined;
      if (this.state === 'retrying') this.recovered();
    };
    // The events since its resourceVersion come right behind the headers: whoever waits for the
    // watch to be back (rewatch) is told at the first of them, or shortly after the headers.
    let backTimer: NodeJS.Timeout | undefined;
    if (!initial && this.backWaiters.length > 0) {
      backTimer = setTimeout(() => this.back(), RESUMED_EVENTS_MS);
      backTimer.unref();
    }
    const deadlineMs = this.timeoutSeconds * 1000 + this.deadlines.graceMs;
    const deadline = setTimeout(() => {
      if (this.state === 'stopped') return;
      this.log.warn({ path: this.path, afterMs: deadlineMs }, 'watch silent past its server-side end; the connection is presumed dead, watching again');
      this.cutByDeadline = true;
      controller.abort();
    }, deadlineMs);
    deadline.unref();
    try {
      await streamEvents(
        res,
        (ev) => {
          if (this.state === 'stopped') return;
          if (initial?.(ev)) return;
          this.store.apply(ev);
          readable();
          if (ev.type !== 'BOOKMARK') this.hooks.settled?.();
          if (backTimer) this.back();
        },
        this.path,
      );
      readable();
    } catch (err) {
      // Not an ERROR event nor a malformed one: the connection went under an accepted watch.
      if (!(err instanceof ApiStatusError) && !(err instanceof SyntaxError)) this.lostStream = err;
      throw err;
    } finally {
      this.inFlight = false;
      clearTimeout(deadline);
      clearTimeout(backTimer);
      clearTimeout(recoverTimer);
    }
  }

  /**
   * Cuts the watch under way (or the wait before the next attempt) and watches again now, from the
   * last resourceVersion (after a pause: its connection may be dead without a sign). Resolves once
   * the watch is back (its first events in, or a relist done), or the informer stopped.
   */
  rewatch(): Promise<void> {
    if (this.stopped()) return Promise.resolve();
    const back = new Promise<void>((resolve) => this.backWaiters.push(resolve));
    if (this.inFlight) {
      this.cutByDeadline = true;
      this.controller?.abort();
    }
    this.waits.wake();
    return back;
  }

  private back(): void {
    for (const resolve of this.backWaiters.splice(0)) resolve();
  }

  /** A (re)list is complete: tell the index what changed against what we had, then we are synced. */
  private replace(fresh: Map<string, T>, resourceVersion: string, by: 'watch-list' | 'paged list'): void {
    this.store.replace(fresh, resourceVersion);
    this.syncing.end();
    this.endHold();
    this.back();
    if (this.state === 'starting') this.log.debug({ path: this.path, objects: fresh.size, by }, 'watch synced');
    this.recovered();
  }

  private endHold(): void {
    this.releaseYoungGeneration?.();
    this.releaseYoungGeneration = undefined;
  }

  private recovered(): void {
    if (this.state === 'retrying') {
      this.log.info({ path: this.path, failures: this.failuresSinceSync }, 'watch recovered');
      ApiReachability.of(this.api).sawAnswer();
    }
    this.state = 'synced';
    this.everSynced = true;
    this.failuresSinceSync = 0;
    this.refusedSince = undefined;
    this.resolveFirstSync();
    this.hooks.settled?.();
  }

  /** Logs a failure (a warning when the watch was fine until now) and marks the watch retrying. */
  private noteFailure(error: Error, retryInMs: number): void {
    this.failuresSinceSync++;
    if (!this.everSynced && this.failuresSinceSync === 1) this.hooks.firstFailure?.(error);
    const fields = { path: this.path, error: errorMessage(error), retryInMs };
    if (this.state !== 'retrying') this.log.warn(fields, 'watch failed, retrying with backoff');
    else this.log.debug(fields, 'watch still failing');
    this.state = 'retrying';
    if (!this.everSynced || !(error instanceof ApiStatusError && error.statusCode === 403)) return void (this.refusedSince = undefined);
    this.refusedSince ??= monotonicMs();
    this.hooks.refused?.(error, monotonicMs() - this.refusedSince);
  }
}
