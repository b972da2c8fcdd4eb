// A guard against V8 marking the whole heap again and again while the proxy moves bulk data.
//
// Why it is needed (V8 src/heap/heap.cc, as in Node 20's V8 11.3 and Node 24's V8 13.6):
// - Node gives every socket read and every decrypted TLS record its own ArrayBuffer. V8 counts
//   those backing stores as external memory until a scavenge finds them dead, and scavenges for
//   them only once 32 MiB of them are young (Heap::AllocateExternalBackingStore,
//   2 × DefaultMaxSemiSpaceSize).
// - It also counts external memory allocated since the last mark-compact against the old
//   generation's allocation limit (Heap::OldGenerationSpaceAvailable), and starts incremental
//   marking when that leaves less room than the young generation's capacity
//   (Heap::IncrementalMarkingLimitReached, against NewSpaceCapacity).
// - After a mark-compact in a quiet heap (little JavaScript allocated per byte moved, which is
//   what a good relay does) the new limit is the old size plus ~8 MiB (MemoryController: factor
//   1.1, Heap::MinimumAllocationLimitGrowingStep). Young read buffers fill that in a few MB of
//   traffic, so such a process marks and compacts its whole heap every 40–50 ms while data
//   flows, and every one of those collections sets the same small limit again. Which processes
//   fall in is chance (a mark-compact during traffic); those that do spend 1.5–2× the CPU per
//   GiB (docs/performance.md, "The GC guard").
//
// The guard watches major collections (perf_hooks 'gc' entries, timed by when they ran). When
// `threshold` of them start within `windowMs` — a healthy proxy has a few a minute — it turns
// incremental marking off for `holdMs`. The read buffers still count against the limit then;
// what changes is what may start a collection: only the old space needing a new page or the
// hard external-memory limit, and such a collection is one full, non-incremental one (a longer
// pause, seen rarely: 0–1 per 512 MiB echoed instead of ~25 a second). After the hold it turns
// incremental marking back on, so start-up heaps, idle memory reduction and large caches get
// V8's defaults whenever the proxy is not thrashing, and asks for one full collection: V8's
// memory reducer is armed only by a mark-compact made while incremental marking is on
// (MemoryReducer::NotifyMarkCompact), and without one the heap a burst grew stayed 40–60 MiB
// above where V8's default brings it. Under a transfer that outlasts the hold, that collection
// can lead into the loop again; the guard then sees it within ~5 collections and holds again.
// The flag is read at each decision (IncrementalMarking::CanBeStarted), so setting it at run
// time takes effect at once. Node documents changing V8 flags after start-up as possibly
// unpredictable, but keeps them writable on purpose for v8.setFlagsFromString; this one was
// flipped every 37 ms under load on Node 20 and 24 without a lost byte (docs/performance.md).
import { PerformanceObserver, constants } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { Logger } from './log.js';

export interface GcGuardOptions {
  /** Major collections within `windowMs` that count as thrashing. */
  threshold: number;
  windowMs: number;
  /** How long incremental marking stays off once thrashing was seen. */
  holdMs: number;
}

export const GC_GUARD_DEFAULTS: GcGuardOptions = { threshold: 5, windowMs: 1_000, holdMs: 30_000 };

/** What the guard touches outside itself; tests give their own. */
export interface GcGuardHooks {
  setV8Flags(flags: string): void;
  /**
   * Calls `onMajor` with each major collection's start time (performance.now()'s clock); returns the
   * function that stops that. Entries arrive in batches when the event loop is free: their
   * delivery time says nothing about how close together they ran.
   */
  observeMajorGcs(onMajor: (startedAt: number) => void): () => void;
  /** One full collection, started soon, not waited for. */
  collectGarbage(): void;
  /** An unref'd timer: the guard never keeps the process alive. */
  setTimer(fn: () => void, ms: number): { cancel(): void };
}

type ExposedGc = (options: { type: 'major'; execution: 'async' }) => Promise<void>;
let exposedGc: ExposedGc | undefined;

function exposeGc(): ExposedGc {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as ExposedGc;
}

export const realGcHooks: GcGuardHooks = {
  setV8Flags: (flags) => v8.setFlagsFromString(flags),
  observeMajorGcs(onMajor) {
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        // Node ≥ 16 puts the kind in `detail` (NodePerformanceGC in @types/node has it, the base type not).
        if ((entry as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) onMajor(entry.startTime);
      }
    });
    observer.observe({ entryTypes: ['gc'] });
    return () => observer.disconnect();
  },
  collectGarbage() {
    try {
      // Node exposes V8's gc() only to contexts made after --expose-gc is set (as Jest's leak
      // detector does); this process's own global scope stays without it.
      exposedGc ??= exposeGc();
      void Promise.resolve(exposedGc({ type: 'major', execution: 'async' })).catch(() => undefined);
    } catch {
      // A Node without it: the memory reducer then waits for V8's next mark-compact.
    }
  },
  setTimer(fn, ms) {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return { cancel: () => clearTimeout(timer) };
  },
};

export class MarkingThrashGuard {
  /** Times of the recent major collections, oldest first (at most `threshold` kept). */
  private readonly recent: number[] = [];
  private hold?: { cancel(): void };
  private stopObserving?: () => void;
  /** How many times thrashing was seen (for logs and tests). */
  engagements = 0;

  constructor(
    private readonly log: Logger,
    private readonly options: GcGuardOptions = GC_GUARD_DEFAULTS,
    private readonly hooks: GcGuardHooks = realGcHooks,
  ) {}

  get engaged(): boolean {
    return this.hold !== undefined;
  }

  start(): this {
    this.stopObserving ??= this.hooks.observeMajorGcs((startedAt) => this.onMajorGc(startedAt));
    return this;
  }

  /** Stops watching and gives V8 its default back. */
  stop(): void {
    this.stopObserving?.();
    this.stopObserving = undefined;
    this.recent.length = 0;
    if (this.hold) this.release(false);
  }

  private onMajorGc(startedAt: number): void {
    if (this.hold) return;
    this.recent.push(startedAt);
    if (this.recent.length > this.options.threshold) this.recent.shift();
    if (this.recent.length < this.options.threshold || startedAt - this.recent[0]! > this.options.windowMs) return;
    this.recent.length = 0;
    this.engagements++;
    this.hooks.setV8Flags('--no-incremental-marking');
    this.hold = this.hooks.setTimer(() => this.release(true), this.options.holdMs);
    this.log.debug(
      { majorGcs: this.options.threshold, withinMs: this.options.windowMs, holdMs: this.options.holdMs },
      'V8 keeps marking the whole heap while data flows; incremental marking off for a while',
    );
  }

  private release(collect: boolean): void {
    this.hold?.cancel();
    this.hold = undefined;
    this.hooks.setV8Flags('--incremental-marking');
    if (collect) this.hooks.collectGarbage();
    this.log.debug('incremental marking back on');
  }
}

/**
 * The guard for a process that serves (foreground proxy, managed daemon), unless whoever started
 * Node chose incremental marking themselves (`node --[no-]incremental-marking …`; the daemon is
 * spawned without the node flags `connect` ran with, so this applies to the foreground proxy).
 */
export function startGcGuard(log: Logger, execArgv: readonly string[] = process.execArgv): MarkingThrashGuard | undefined {
  if (execArgv.some((arg) => /^--(no-?)?incremental[-_]marking(=|$)/.test(arg))) return undefined;
  return new MarkingThrashGuard(log).start();
}
