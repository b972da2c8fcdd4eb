// The knobs of a list+watch (informer.ts): its deadlines, how it lists, and the hooks an owner
// may give it.

export interface WatchDeadlines {
  /** The API server ends each watch after this (`timeoutSeconds`); picked at random in [min, 2×min) per informer. */
  watchTimeoutSeconds: number;
  /** A watch still open this long after its server-side end is on a dead path: cut it and watch again. */
  graceMs: number;
  /** Limit for the response headers of a list or watch request. */
  headersTimeoutMs: number;
}

/**
 * A watch on a connection that died silently (laptop asleep, VPN reconnected, NAT state dropped)
 * sends nothing and never ends: TCP keepalive would notice after ~11 minutes, with the caches
 * stale all along. client-go bounds every watch with a server-side `timeoutSeconds`; we do the
 * same and treat a watch that outlives it as dead. Shorter than client-go's 5–10 min: a re-watch
 * from the last resourceVersion costs the API server almost nothing, a stale route costs users.
 */
export const WATCH_DEADLINES: WatchDeadlines = { watchTimeoutSeconds: 60, graceMs: 15_000, headersTimeoutMs: 30_000 };

export interface InformerOptions {
  /** Try the streaming watch-list first (default true); servers without it are remembered per connection. */
  watchList?: boolean;
  pageSize?: number;
}

/** For owners that need more than the store (slim-watch.ts). */
export interface InformerHooks {
  /** Status codes that stop the watch while it is on its first list (default 401, 403). */
  stopOn?: readonly number[];
  /** After a (re)list is in, and after each watch event applied. */
  settled?(): void;
  /** The first list failed and is being retried (the first sync is still to come). */
  firstFailure?(err: Error): void;
  /**
   * A watch that had synced is refused (403) on every attempt for `forMs` now: its rights are
   * gone (a namespace deleted with its RoleBinding). The owner may stop it.
   */
  refused?(err: Error, forMs: number): void;
}

/** A first sync its owner gave up waiting for (stop() before the first list): no refusal of the server's. */
export class WatchStoppedError extends Error {
  constructor(path: string) {
    super(`the watch of ${path} was stopped before its first list`);
    this.name = 'WatchStoppedError';
  }
}
