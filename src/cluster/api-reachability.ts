// "Is the API server back?" — one answer per API connection for every watch waiting out a backoff
// after the server stopped answering (a restart, a laptop offline, a VPN reconnecting). While
// anyone waits, /readyz is asked about once a second (one request at a time); once it has seen the
// server gone and then answering again, every waiter is woken, so the watches resume within about
// a second of the server's return instead of after a backoff grown through the outage. A server
// that answers at the first probe wakes nobody: its watch failing was not the server being away,
// and its normal backoff applies (no retry loop against a server that is up).
import type { ApiConnection } from './api.js';
import { ApiStatusError } from './api.js';
import { apiGet } from './list-watch.js';

export const PROBE_INTERVAL_MS = 1_000;
/** A probe that gets no headers in this long counts as the server away. */
const PROBE_TIMEOUT_MS = 3_000;
const PROBE_PATH = '/readyz';

/** How the last probe went, for status. */
export interface ReachabilityState {
  reachable: boolean;
  /** Since when (ms since the epoch) the server has been in that state, as far as the probes saw. */
  since: number;
  lastError?: string;
}

const registry = new WeakMap<ApiConnection, ApiReachability>();

export class ApiReachability {
  private readonly waiters = new Set<() => void>();
  private timer?: NodeJS.Timeout;
  private probing = false;
  /** A probe since the waiters arrived found the server away: the next answer is its return. */
  private sawAway = false;
  private state?: ReachabilityState;

  static of(api: ApiConnection): ApiReachability {
    let r = registry.get(api);
    if (!r) registry.set(api, (r = new ApiReachability(api)));
    return r;
  }

  constructor(
    private readonly api: ApiConnection,
    private readonly intervalMs = PROBE_INTERVAL_MS,
  ) {}

  get last(): ReachabilityState | undefined {
    return this.state;
  }

  /**
   * Resolves once a probe has seen the server away and then answering (true), or after `maxMs`
   * (false), or when `signal` aborts (false). Probing runs only while someone waits.
   */
  waitForReturn(maxMs: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve(false);
      const done = (back: boolean) => {
        clearTimeout(timeout);
        signal?.removeEventListener('abort', aborted);
        this.waiters.delete(wake);
        if (this.waiters.size === 0) this.idle();
        resolve(back);
      };
      const wake = () => done(true);
      const aborted = () => done(false);
      const timeout = setTimeout(() => done(false), maxMs);
      timeout.unref();
      signal?.addEventListener('abort', aborted, { once: true });
      if (this.waiters.size === 0) this.sawAway = false;
      this.waiters.add(wake);
      this.schedule(0);
    });
  }

  private idle(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(ms: number): void {
    if (this.timer || this.probing || this.waiters.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.probe();
    }, ms);
    this.timer.unref();
  }

  private async probe(): Promise<void> {
    this.probing = true;
    let answered: boolean;
    let error: string | undefined;
    try {
      const res = await apiGet(this.api, PROBE_PATH, AbortSignal.timeout(PROBE_TIMEOUT_MS), PROBE_TIMEOUT_MS);
      res.resume();
      answered = true;
    } catch (err) {
      // Any answer but "not ready" means the server is there (401/403/404: it does not let us
      // see its readiness, but it answers); 5xx and 429 mean it is not serving yet.
      answered = err instanceof ApiStatusError && err.statusCode < 500 && err.statusCode !== 429;
      if (!answered) error = err instanceof Error ? err.message : String(err);
    }
    this.probing = false;
    if (!this.state || this.state.reachable !== answered) this.state = { reachable: answered, since: Date.now(), ...(error ? { lastError: error } : {}) };
    else if (error) this.state.lastError = error;
    if (!answered) this.sawAway = true;
    else if (this.sawAway) {
      this.sawAway = false;
      for (const wake of [...this.waiters]) wake();
    }
    this.schedule(this.intervalMs);
  }
}
