// How far a (re)list of one informer has got, for the start-up progress lines: objects received
// so far, and the total once known — a paged LIST says it with each page (remainingItemCount), the
// streaming watch-list says nothing, so a sync that takes a while asks for it once (`limit=1`).
import type { ApiConnection } from './api.js';
import { countObjects } from './list-watch.js';
import { monotonicMs } from '../core/clock.js';

/** While a sync runs longer than this, ask for the total (one object, `limit=1`) for the progress lines. */
const TOTAL_PROBE_AFTER_MS = 1_000;

/** Objects received so far by a (re)list still running, and how many there are when the server says. */
export interface SyncProgress {
  listed: number;
  total?: number;
  /** Waiting out what the server asked (Retry-After): no headway is due meanwhile. */
  waiting?: true;
}

export class SyncProgressTracker {
  private syncing?: SyncProgress & { probe?: NodeJS.Timeout; waitUntil?: number };

  constructor(
    private readonly api: ApiConnection,
    private readonly path: string,
    private readonly headersTimeoutMs: number,
  ) {}

  /** While a (re)list runs: objects received so far and the total when known. */
  get progress(): SyncProgress | undefined {
    const s = this.syncing;
    return (
      s && {
        listed: s.listed,
        ...(s.total !== undefined ? { total: s.total } : {}),
        ...(s.waitUntil !== undefined && s.waitUntil > monotonicMs() ? { waiting: true as const } : {}),
      }
    );
  }

  /** The server asked to wait `ms` (Retry-After) before the list goes on. */
  waitFor(ms: number): void {
    if (this.syncing) this.syncing.waitUntil = monotonicMs() + ms;
  }

  /** A (re)list begins; `probeTotal` when the way of listing will not say the total itself. */
  begin(probeTotal: boolean): void {
    this.end();
    const progress: SyncProgress & { probe?: NodeJS.Timeout } = { listed: 0 };
    this.syncing = progress;
    if (!probeTotal) return;
    progress.probe = setTimeout(() => {
      countObjects(this.api, this.path, this.headersTimeoutMs).then(
        (total) => {
          if (total !== undefined) progress.total = total;
        },
        () => undefined,
      );
    }, TOTAL_PROBE_AFTER_MS);
    progress.probe.unref();
  }

  /** Objects received so far (and the total, when the server said it); ignored when no sync runs. */
  listed(count: number, total?: number): void {
    if (!this.syncing) return;
    this.syncing.listed = count;
    if (total !== undefined) this.syncing.total = total;
  }

  end(): void {
    clearTimeout(this.syncing?.probe);
    this.syncing = undefined;
  }
}

/**
 * Whether a first sync still gets somewhere, judged from the cache's status: some watch listed
 * more objects than it ever had, or more watches are synced than ever. A list that starts over
 * (an expired continue token, a retry) moves again only once it passes where it got before.
 */
export class SyncHeadway {
  private readonly furthest = new Map<string, number>();
  private mostSynced = 0;
  private looked = false;

  /** True when `status` shows headway since the last call (the first call always does). */
  moved(status: { watches: Record<string, string>; syncing?: Record<string, SyncProgress> }): boolean {
    let moved = !this.looked;
    this.looked = true;
    const synced = Object.values(status.watches).filter((state) => state === 'synced').length;
    if (synced > this.mostSynced) {
      this.mostSynced = synced;
      moved = true;
    }
    for (const [label, p] of Object.entries(status.syncing ?? {})) {
      // The server said when to ask again: the time it asked for is not a stall.
      if (p.waiting) moved = true;
      if (p.listed > (this.furthest.get(label) ?? 0)) {
        this.furthest.set(label, p.listed);
        moved = true;
      }
    }
    return moved;
  }
}
