// The cache's options and the status it reports (for `status` and the progress lines).
import type { SyncProgress, WatchDeadlines, WatchState } from './informer.js';
import type { PodLookupLimits } from './pod-lookup.js';
import type { WatchSetOptions } from './watch-set.js';

export interface CacheStatus {
  scope: 'cluster' | 'namespaces';
  namespaces: string[];
  watches: Record<string, WatchState>;
  /** Objects the cache holds now, per kind ("services", "endpointslices", "pods", "namespaces"), every watched namespace summed. */
  objects?: Record<string, number>;
  /** Per watch still on its first list (start-up), by label ("pods", "services in shop"): objects listed so far, of how many when known. */
  syncing?: Record<string, SyncProgress>;
}

export interface CacheWatchOptions extends WatchSetOptions {
  deadlines?: WatchDeadlines;
  /** Default false: pods are looked up on demand (see pod-lookup.ts); true watches running pods. */
  watchPods?: boolean;
  /** While the first sync runs, a progress line per kind this often (default 1 s). */
  progressIntervalMs?: number;
  podLookup?: PodLookupLimits;
}

/** While the cache syncs, a progress line per kind this often. */
export const PROGRESS_LOG_INTERVAL_MS = 1_000;
/** A kind whose progress has not moved is said again only every this many intervals. */
const PROGRESS_REPEAT_INTERVALS = 10;

/**
 * Which kinds' progress is worth a line at this interval: those that moved since their last line,
 * and the others every PROGRESS_REPEAT_INTERVALS. An API server that lists nothing (unreachable,
 * stalled) gave three identical lines a second for the 30 s a sync may take, again at each retry.
 */
export class ProgressPacer {
  private readonly said = new Map<string, { key: string; intervals: number }>();

  due(kind: string, p: SyncProgress): boolean {
    const key = `${p.listed}/${p.total ?? ''}/${p.waiting ? 'waiting' : ''}`;
    const last = this.said.get(kind);
    if (last && last.key === key && ++last.intervals < PROGRESS_REPEAT_INTERVALS) return false;
    this.said.set(kind, { key, intervals: 0 });
    return true;
  }
}

/** "pods" for "/api/v1/pods?fieldSelector=…", "endpointslices" for a namespaced path. */
export function kindOf(path: string): string {
  return path.split('?')[0]!.split('/').pop() ?? path;
}

/** "services", or "services in shop" for a namespaced watch (status and progress lines). */
export function watchLabel(path: string): string {
  const ns = /\/namespaces\/([^/]+)\/[^/?]+/.exec(path);
  return ns ? `${kindOf(path)} in ${decodeURIComponent(ns[1]!)}` : kindOf(path);
}
