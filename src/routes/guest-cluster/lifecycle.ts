// The life of a guest cluster (guest-cluster.ts), which must reach its API server and sync its
// watch cache before its route (cluster or konnectivity) can serve. 'starting'
// (reaching the API server, the konnectivity server) → 'syncing' → 'ready'. An attempt that fails
// leaves the route in 'error' and the next follows 5 s later, doubling to a minute, until one
// succeeds or the route is closed; what the failed attempt left running (watches, a tunnel) is
// stopped first. A stream for a route on its first start (starting or syncing) waits for it,
// bounded by the caller's signal (its connect timeout running out is a timeout: SOCKS 0x06 /
// HTTP 504); one for a route that has failed fails at once (0x04 / 502) until an attempt succeeds
// — also while the next attempt runs, so a cluster that is down answers alike all the time.
// close() ends the retries, and an attempt running at that moment stops at its next step: it
// never restarts what close() has stopped.
import type { Logger } from '../../core/log.js';
import { ConnectTimeoutError, RouteUnavailableError, errorMessage } from '../../core/errors.js';
import { abortable } from '../../core/abort.js';
import { testHookMs } from '../../core/test-hooks.js';
import type { RouteState } from '../route.js';

export const RETRY_MIN_MS = 5_000;
export const RETRY_MAX_MS = 60_000;

/**
 * Test hook, set by no flag or config key: the first retry's delay (RETRY_MIN_MS otherwise), so
 * tests of the retries need not wait 5 s for each. In-process tests pass it to the
 * routes; a proxy the tests run as a process reads TEST_RETRY_ENV (whole milliseconds, at
 * least 1; anything else is ignored). Not documented for users: the product's timing is 5 s.
 */
export interface RetryTiming {
  retryMinMs?: number;
}

export const TEST_RETRY_ENV = 'KUBECTL_PROXYOUT_TEST_ROUTE_RETRY_MS';

/** Records the state an attempt has reached; throws when the route was closed meanwhile. */
export type Step = (state: 'starting' | 'syncing') => void;

export interface RouteAttempt {
  /** One attempt to become ready: call `step` after every await (and to say it now syncs). */
  connect(step: Step): Promise<void>;
  /** Stops what a failed attempt left running, before the next attempt. */
  reset(): Promise<void>;
}

export class RouteLifecycle {
  private current: RouteState = 'starting';
  /** When the route entered its current state (ms since the epoch). */
  private changedAt = Date.now();
  private why?: string;
  private closed = false;
  /** Resolves once the route is ready; rejects when it is closed first. */
  private readonly ready: Promise<void>;
  private settle!: { ready: () => void; closed: (err: Error) => void };
  /** Resolves once the first attempt succeeded or failed (or the route closed). */
  private readonly decided: Promise<void>;
  private decide!: () => void;
  private retryTimer?: NodeJS.Timeout;
  private readonly retryMinMs: number;
  private retryMs: number;

  constructor(
    private readonly kind: string,
    private readonly name: string,
    private readonly log: Logger,
    private readonly attempt: RouteAttempt,
    timing: RetryTiming = {},
    /** How its errors name the route (`${kind} route ${name}` when not given). */
    private readonly describedAs?: string,
  ) {
    this.retryMinMs = timing.retryMinMs ?? testHookMs(TEST_RETRY_ENV) ?? RETRY_MIN_MS;
    this.retryMs = this.retryMinMs;
    this.ready = new Promise<void>((resolve, reject) => (this.settle = { ready: resolve, closed: reject }));
    this.ready.catch(() => undefined);
    this.decided = new Promise<void>((resolve) => (this.decide = resolve));
  }

  /**
   * While the first attempt runs: resolves once it succeeds or fails, rejects only when `signal`
   * aborts. Undefined once settled (ready, or failed: a retry of a failed route counts as failed).
   */
  whenSettled(signal: AbortSignal): Promise<void> | undefined {
    if (this.closed || this.why !== undefined || (this.current !== 'starting' && this.current !== 'syncing')) return undefined;
    return abortable(this.decided, signal);
  }

  get state(): RouteState {
    return this.current;
  }

  /** Since when (ms since the epoch) the route has been in its current state. */
  get since(): number {
    return this.changedAt;
  }

  private enter(state: RouteState): void {
    if (state !== this.current) this.changedAt = Date.now();
    this.current = state;
  }

  /** Why the last attempt failed (kept while the next one runs; cleared once ready). */
  get reason(): string | undefined {
    return this.why;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private get label(): string {
    return this.describedAs ?? `${this.kind} route ${this.name}`;
  }

  /**
   * The first attempt: rejects when it fails (the route is then in error and tries again later).
   * Its caller reports that failure (proxy.ts): a proxy that cannot start then says why in one
   * line, not also that the route tries again.
   */
  async start(): Promise<void> {
    try {
      await this.run();
    } catch (err) {
      this.failed(err, false);
      throw err;
    }
  }

  private async run(): Promise<void> {
    this.step('starting');
    await this.attempt.connect((state) => this.step(state));
    if (this.closed) throw this.closedError();
    this.enter('ready');
    this.why = undefined;
    this.retryMs = this.retryMinMs;
    this.settle.ready();
    this.decide();
  }

  private step(state: 'starting' | 'syncing'): void {
    if (this.closed) throw this.closedError();
    // A retry after a failure: the route is still failing (it answers alike all the time) since then.
    if (this.why !== undefined) this.current = state;
    else this.enter(state);
  }

  private closedError(): RouteUnavailableError {
    return new RouteUnavailableError(`${this.label} is closed`);
  }

  private failed(err: unknown, report = true): void {
    if (this.closed) return;
    if (this.why === undefined) this.enter('error');
    else this.current = 'error'; // a retry failed: failing since the first failure
    this.why = errorMessage(err);
    // The route name is bound to this logger (proxy/build-table.ts).
    if (report) this.log.warn({ error: this.why, retryInMs: this.retryMs }, `${this.kind} route not available; trying again later`);
    this.retryTimer = setTimeout(() => void this.retry(), this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
    this.decide();
  }

  private async retry(): Promise<void> {
    try {
      await this.attempt.reset();
      await this.run();
    } catch (err) {
      this.failed(err);
    }
  }

  /**
   * Resolves when the route can serve. Failed before (in error, or retrying since): a
   * RouteUnavailableError at once. On its first start: waits until it is ready or `signal` aborts — a ConnectTimeoutError when the signal's
   * reason is a TimeoutError (the connect timeout), else a RouteUnavailableError saying why.
   */
  async whenReady(signal: AbortSignal): Promise<void> {
    if (this.current === 'ready') return;
    if (this.closed) throw this.closedError();
    // Failed before (in error, or retrying): down until an attempt succeeds.
    if (this.current === 'error' || this.why !== undefined) throw new RouteUnavailableError(`${this.label} is not available: ${this.why}`);
    await abortable(this.ready, signal).catch(() => {
      if (this.closed) throw this.closedError();
      const still = this.current === 'error' ? `failing: ${this.why}` : this.current === 'syncing' ? 'syncing its cache' : 'starting';
      if ((signal.reason as Error | undefined)?.name === 'TimeoutError') throw new ConnectTimeoutError(`${this.label} is still ${still}`);
      throw new RouteUnavailableError(`${this.label} is still ${still}`);
    });
  }

  /** No further attempts; the one running stops at its next step; waiting streams fail. */
  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.settle.closed(this.closedError());
    this.decide();
  }
}
