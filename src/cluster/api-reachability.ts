// "Is the API server back?" — one answer per API connection, for the watches waiting out a backoff
// after the server stopped answering (a restart, a laptop offline, a VPN reconnecting), for the
// route's health (routes/guest-cluster/health.ts), and for whoever must renew what was open across
// an absence. /readyz is asked about once a second, one request at a time, while anyone waits,
// and — once a stream that died made the route suspect the path (suspect()) — for as long as the
// server does not answer; a ready route also asks when it has heard nothing from its server for
// 10 s. When it answers after an absence (seen by a probe, or suspected), every waiter is woken
// and every onReturn listener called: the watches resume within about a second of the return, on
// new connections. A server that answers at the first probe of a plain wait wakes nobody: its
// watch failing was not the server being away, and the normal backoff applies (no retry loop
// against a server that is up).
import type { ApiConnection } from './api.js';
import { ApiStatusError, CredentialError } from './api.js';
import { apiGet } from './list-watch.js';
import { describeEgress } from './egress-proxy.js';
import { monotonicMs } from '../core/clock.js';
import { errorMessage, outOfFiles } from '../core/errors.js';
import { serverCertRefused } from './proxy-failures.js';

export const PROBE_INTERVAL_MS = 1_000;
/** A probe that gets no headers in this long counts as the server away. */
const PROBE_TIMEOUT_MS = 3_000;
/**
 * A ready route whose server has not been heard from this long is probed (probeIfQuiet): a
 * server that hung (stopped, a path that drops packets) resets nothing, and an idle route's
 * watches may wait a minute for their next bookmark.
 */
export const QUIET_PROBE_MS = 10_000;
const PROBE_PATH = '/readyz';

/** What the last probe (or the last watch that got an answer) saw, for a route's health. */
export interface ReachabilityState {
  /** The server answered over HTTP at all (false: refused, reset, timed out: nothing to send a stream to). */
  answered: boolean;
  /** It answered and is serving (not 5xx or 429). */
  serving: boolean;
  /** Since when (ms since the epoch) the server has been in that state, as far as we saw. */
  since: number;
  /** No answer because its certificate was not accepted: a CA or certificate other than the kubeconfig trusts. */
  untrusted?: boolean;
  lastError?: string;
}

const registry = new WeakMap<ApiConnection, ApiReachability>();

export class ApiReachability {
  private readonly waiters = new Set<() => void>();
  private timer?: NodeJS.Timeout;
  private probing = false;
  /** A probe found the server away, or a dead stream made us suspect it: the next answer is its return. */
  private sawAway = false;
  private state?: ReachabilityState;
  /** When (monotonic ms) the server last answered, however we saw it. */
  private lastAnswerAt = -Infinity;
  /** When (monotonic ms) the last probe was sent; counted from the start, so a route just ready is not asked at once. */
  private lastProbeAt = monotonicMs();
  private readonly returnListeners = new Set<() => void>();

  static of(api: ApiConnection): ApiReachability {
    let r = registry.get(api);
    if (!r) registry.set(api, (r = new ApiReachability(api)));
    return r;
  }

  constructor(
    private readonly api: ApiConnection,
    private readonly intervalMs = PROBE_INTERVAL_MS,
  ) {}

  /**
   * Called each time the server, seen away, answers again. What was open to it across the absence
   * may be dead without a sign (a NAT that forgot it, a new address): the owner renews it.
   * Returns an unsubscribe.
   */
  onReturn(listener: () => void): () => void {
    this.returnListeners.add(listener);
    return () => this.returnListeners.delete(listener);
  }

  get last(): ReachabilityState | undefined {
    return this.state;
  }

  /**
   * Resolves once the server, seen away, answers again (true), or after `maxMs` (false), or when
   * `signal` aborts (false).
   */
  waitForReturn(maxMs: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve(false);
      const done = (back: boolean) => {
        clearTimeout(timeout);
        signal?.removeEventListener('abort', aborted);
        this.waiters.delete(wake);
        if (this.waiters.size === 0 && this.state?.serving !== false) this.idle();
        resolve(back);
      };
      const wake = () => done(true);
      const aborted = () => done(false);
      const timeout = setTimeout(() => done(false), maxMs);
      timeout.unref();
      signal?.addEventListener('abort', aborted, { once: true });
      // A new round of waiting forgets an old absence, unless the server is away now.
      if (this.waiters.size === 0 && this.state?.serving !== false) this.sawAway = false;
      this.waiters.add(wake);
      this.schedule(0);
    });
  }

  private idle(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * A stream or tunnel to this server failed without an answer (a dial timed out, a tunnel stopped
   * answering pings): probe now, and keep probing while the server does not serve, so a route
   * knows within seconds that its path is dead, and again when it is back.
   */
  suspect(): void {
    // Something open to the server died: once it answers (maybe at a new address), what is still
    // open to it is renewed (onReturn), as after an absence.
    this.sawAway = true;
    this.schedule(0);
  }

  /**
   * A new request to the server got no answer in time (a tunnel that did not open): probe now.
   * Unlike suspect(), an answer at once renews nothing: the server is there and what hung is
   * beyond it (a kubelet that does not answer); only an absence the probes see ends in a return.
   */
  check(): void {
    this.schedule(0);
  }

  /**
   * Probes once when the server has not been heard from, nor asked, for `quietMs` (a ready
   * route's health check calls this each second): a hung server then shows within seconds.
   */
  probeIfQuiet(quietMs = QUIET_PROBE_MS): void {
    const now = monotonicMs();
    if (now - Math.max(this.lastAnswerAt, this.lastProbeAt) >= quietMs) this.schedule(0);
  }

  /** Someone waits for the server, or the last probe found it away: keep asking. */
  private get wanted(): boolean {
    return this.waiters.size > 0 || this.state?.serving === false;
  }

  private schedule(ms: number): void {
    if (this.timer || this.probing) return;
    if (ms > 0 && !this.wanted) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.probe();
    }, ms);
    this.timer.unref();
  }

  /**
   * Something else got an answer from the server (a watch resumed, a port-forward opened): it is
   * there, whatever the last probe said.
   */
  sawAnswer(): void {
    this.lastAnswerAt = monotonicMs();
    this.record(true, true);
  }

  private record(answered: boolean, serving: boolean, error?: string, untrusted = false): void {
    if (!this.state || this.state.answered !== answered || this.state.serving !== serving)
      this.state = { answered, serving, since: Date.now(), ...(error ? { lastError: error } : {}) };
    else if (error) this.state.lastError = error;
    if (untrusted) this.state.untrusted = true;
    else delete this.state.untrusted;
  }

  private async probe(): Promise<void> {
    this.probing = true;
    const startedAt = monotonicMs();
    this.lastProbeAt = startedAt;
    let answered = true;
    let serving = true;
    let error: string | undefined;
    let untrusted = false;
    try {
      const res = await apiGet(this.api, PROBE_PATH, AbortSignal.timeout(PROBE_TIMEOUT_MS), PROBE_TIMEOUT_MS, true);
      res.resume();
    } catch (err) {
      if (err instanceof CredentialError || outOfFiles(err)) {
        // No request could be sent (no credentials, no file descriptor for a socket): this says
        // nothing of the server (the route's health shows the credentials).
        this.probing = false;
        this.schedule(this.intervalMs);
        return;
      }
      // Any answer but "not ready" means the server is there (401/403/404: it does not let us
      // see its readiness, but it answers); 5xx and 429 mean it is not serving yet.
      answered = err instanceof ApiStatusError;
      serving = answered && (err as ApiStatusError).statusCode < 500 && (err as ApiStatusError).statusCode !== 429;
      // Our own deadline ("The operation was aborted" says nothing), with the proxy it went through.
      const late = (err as Error).name === 'AbortError' || /^headers timeout/.test(errorMessage(err));
      if (!serving) error = late ? `no answer within ${PROBE_TIMEOUT_MS / 1000} s${describeEgress(this.api.egress)}` : errorMessage(err);
      untrusted = serverCertRefused(err);
      // The next probe (a second on) then trusts a CA file rotated in place.
      if (untrusted) this.api.rereadChangedCa();
    }
    this.probing = false;
    // A failure older than an answer seen meanwhile (the probe was sent while the server was away,
    // a port-forward opened since) is not news: the route must not turn away streams for it.
    if (!serving && this.lastAnswerAt >= startedAt) {
      this.schedule(this.intervalMs);
      return;
    }
    if (serving) this.lastAnswerAt = monotonicMs();
    this.record(answered, serving, error, untrusted);
    if (!serving) this.sawAway = true;
    else if (this.sawAway) {
      this.sawAway = false;
      for (const wake of [...this.waiters]) wake();
      for (const listener of [...this.returnListeners]) listener();
    }
    this.schedule(this.intervalMs);
  }
}
