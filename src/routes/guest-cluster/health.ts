// Whether a route that became ready still serves: 'degraded' while its credentials cannot be had
// (an exec plugin failing: an SSO session expired), its API server does not answer
// (api-reachability.ts saw it away: its cache still names Services, but no new tunnel can open) or
// a watch of its cache keeps failing (names may be stale). Checked once a second while the route
// is ready (a server quiet for 10 s is probed, so a hung one shows too), so `status`,
// `status --json` and `doctor` are true within seconds; each change is one log line, however many
// requests fail meanwhile.
import type { Logger } from '../../core/log.js';
import type { ApiConnection } from '../../cluster/api.js';
import { ApiReachability, QUIET_PROBE_MS } from '../../cluster/api-reachability.js';
import type { ClusterCache } from '../../cluster/cache.js';
import { kindOf } from '../../cluster/cache-status.js';
import { monotonicMs } from '../../core/clock.js';

const CHECK_INTERVAL_MS = 1_000;
/** Watches must have been failing this long before they make the route degraded (one retry is routine). */
const WATCH_FAILING_MS = 1_500;

export interface Degraded {
  reason: string;
  /** Since when (ms since the epoch). */
  since: number;
  /** No request reaches the API server (no answer at all, or no credentials to send): a new stream cannot open, so it fails at once. */
  unreachable: boolean;
}

export class RouteHealth {
  private timer?: NodeJS.Timeout;
  private degraded?: Degraded;
  /** Since when (monotonic) some watch has been failing, as the checks saw it. */
  private watchFailingSince?: number;
  /** When it last served again after being degraded (ms since the epoch): the route is ready since then, not since it started. */
  recoveredAt?: number;

  constructor(
    private readonly kind: string,
    private readonly api: ApiConnection,
    private readonly server: string,
    private readonly cache: ClusterCache,
    /** The route's logger (its name is bound to it). */
    private readonly log: Logger,
    private readonly quietProbeMs = QUIET_PROBE_MS,
  ) {}

  /** Starts the checks (idempotent); the route calls it once it is ready. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.check(), CHECK_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.degraded = undefined;
  }

  /** Degraded now, and why (undefined: healthy). */
  get current(): Degraded | undefined {
    return this.degraded;
  }

  /**
   * The last check's verdict, checked again when it found the route degraded (it may be a second
   * old): a stream is not turned away for an absence the API server has ended since.
   */
  currentRechecked(): Degraded | undefined {
    return this.degraded ? this.check() : undefined;
  }

  /** One check: what is wrong now, logged when that changes. */
  check(): Degraded | undefined {
    // A server that hung resets nothing: ask it when it has been quiet (api-reachability.ts).
    if (this.timer) ApiReachability.of(this.api).probeIfQuiet(this.quietProbeMs);
    const next = this.evaluate();
    const was = this.degraded;
    if (next && (!was || was.reason !== next.reason || was.unreachable !== next.unreachable)) {
      // The same trouble seen a second way keeps its start.
      this.degraded = was ? { ...next, since: was.since } : next;
      if (!was) this.log.warn({ reason: next.reason }, `${this.kind} route degraded`);
    } else if (!next && was) {
      this.degraded = undefined;
      this.recoveredAt = Date.now();
      this.log.info({ degradedForMs: Date.now() - was.since }, `${this.kind} route serving again`);
    }
    return this.degraded;
  }

  private evaluate(): Degraded | undefined {
    // Watches are timed whatever else is wrong: they failed all through an outage, and the first
    // check after the server answers must not call the route serving while they still fail.
    const failing = this.cache.failingWatches();
    // By time, not by count: status() checks too, and its callers must not make it quicker.
    if (!failing.length) this.watchFailingSince = undefined;
    else this.watchFailingSince ??= monotonicMs();
    // Credentials that cannot be had: no request can be sent; the plugin's own words say why.
    const credentials = this.api.credentialProblem;
    // Refused ones may be taken again (a revocation undone), awaited ones may still come (a login
    // under way): streams still try, and tell when they are.
    if (credentials) return { reason: credentials.message, since: credentials.since, unreachable: !credentials.refused && !credentials.waiting };
    const reach = ApiReachability.of(this.api).last;
    if (reach && !reach.serving) {
      // A certificate refused is an answer of sorts: say so, not "does not answer" (a rotated CA).
      const what = reach.answered
        ? 'is not serving'
        : reach.untrusted
          ? "presents a certificate the kubeconfig's CA does not vouch for (was it rotated? a kubeconfig rewritten for it is taken within seconds)"
          : 'does not answer';
      return {
        reason: `the API server ${this.server} ${what}${reach.lastError ? `: ${reach.lastError}` : ''}`,
        since: reach.since,
        unreachable: !reach.answered,
      };
    }
    if (this.watchFailingSince === undefined || monotonicMs() - this.watchFailingSince < WATCH_FAILING_MS) return undefined;
    const first = failing[0]!;
    return { reason: `the watch of ${kindOf(first.path)} is failing: ${first.error}`, since: Date.now(), unreachable: false };
  }
}
