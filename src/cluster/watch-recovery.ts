// What a list+watch does after its watch request ended or failed: the one recovery policy of
// every watch the proxy keeps (informer.ts, and slim-watch.ts on top of it). It follows client-go's
// reflector (staging/src/k8s.io/client-go/tools/cache/reflector.go: resume from the last
// resourceVersion; 410 Expired relists; everything else retried with a growing backoff), with
// these differences that matter after a compaction, a restart or a sleep:
// - the first 410 after a healthy watch, or after any other failure, relists at once: the watch
//   was fine, only its position was compacted away (a quiet resource resumed after its server
//   restarted, say) — waiting the backoff grown by the outage before it only delays every change
//   made meanwhile. Only 410s with nothing between them (a relisted watch expired at once) are
//   paced; a control plane restarted replica by replica gives a short watch, an outage, a 410;
// - a watch that ran a while and then lost its connection ended (informer.ts): resumed at once, as
//   the reflector takes a probable EOF, not backed off as a failure;
// - a failure with no HTTP answer (refused, reset, timed out) waits the backoff or until the API
//   server is seen back (api-reachability.ts), whichever comes first;
// - 429 and 5xx with Retry-After (an API server whose watch cache is initialising, or one behind
//   the resourceVersion asked for: 504 "Too large resource version") wait what the server asks,
//   within bounds, as client-go's rest client does for every request (request.go checkWait);
// - credentials that cannot be had (an SSO session expired) are tried again every second: the API
//   connection holds the failure, so the plugin itself runs once per hold step, and a user who
//   logs in again is noticed at the end of the step;
// - a watch from a resourceVersion the server answers with another status (403: list allowed,
//   watch not; 500) lists again after the backoff, as the reflector does for all but 429 and a
//   refused connection (isWatchErrorRetriable): retried from the same version, the cache would
//   serve its last list for ever.
import { ApiStatusError, CredentialError } from './api.js';
import { WatchBackoff } from './backoff.js';
import { isGone } from './list-watch.js';

/** A watch that ran at least this long was healthy: a 410 after it relists at once. */
export const HEALTHY_WATCH_MS = 1_000;
/** A watch whose credentials cannot be had tries again this often (ApiConnection holds the failure meanwhile). */
const CREDENTIAL_RETRY_MS = 1_000;
/** Retry-After is honoured within these bounds (seconds). */
const RETRY_AFTER_MIN_S = 1;
const RETRY_AFTER_MAX_S = 30;

export type Recovery =
  /** The resourceVersion is gone, or the watch from it refused (`failed`): list again after `delayMs`. */
  | { kind: 'relist'; delayMs: number; failed?: true }
  /** Try the same request again after `delayMs`; `untilReachable`: sooner if the server is seen back. */
  | { kind: 'retry'; delayMs: number; untilReachable: boolean }
  /** Refused while starting (permissions, a resource not served): the owner is told, no retry. */
  | { kind: 'stop' };

export interface RecoveryContext {
  /** The failed request was the first list, or a watch-list still sending its initial events. */
  starting: boolean;
  /** A watch from a resourceVersion was under way (so a 410 means that version is gone). */
  resuming: boolean;
  /** Status codes that stop a watch still on its first list (default 401, 403). */
  stopOn?: readonly number[];
}

/** No HTTP answer at all: the API server (or the path to it) is not there (credentials that could not be had are not that). */
export function isUnreachable(err: unknown): boolean {
  return !(err instanceof ApiStatusError) && !(err instanceof CredentialError);
}

export class WatchRecovery {
  private readonly backoff = new WatchBackoff();
  /** 410s since the last healthy watch: the first relists at once, the next ones are paced. */
  private gonesInARow = 0;
  /** Watches the server ended as soon as they began, in a row. */
  private quickEndsInARow = 0;

  /** A watch ran this long before it ended or failed (a healthy one clears the run of 410s). */
  watchRan(ms: number): void {
    if (ms < HEALTHY_WATCH_MS) return;
    this.gonesInARow = 0;
    this.quickEndsInARow = 0;
  }

  /** What to do after `err` ended a list or watch. */
  afterError(err: unknown, ctx: RecoveryContext): Recovery {
    if (ctx.starting && err instanceof ApiStatusError && (ctx.stopOn ?? [401, 403]).includes(err.statusCode)) return { kind: 'stop' };
    if (ctx.resuming && isGone(err)) {
      // A server that expires every watch at once is not listed in a loop: the second 410 in a row waits.
      const delayMs = this.gonesInARow++ === 0 ? 0 : this.backoff.next();
      return { kind: 'relist', delayMs };
    }
    // Another failure between two 410s breaks the run: its own retry is paced (backoff or
    // Retry-After), so the next 410 cannot make a tight relist loop.
    this.gonesInARow = 0;
    // Credentials that cannot be had fail at once, without running the plugin again, until
    // ApiConnection's hold runs out: retrying every second costs nothing and notices a user who
    // logged in again within a second of the hold.
    if (err instanceof CredentialError) return { kind: 'retry', delayMs: Math.round(CREDENTIAL_RETRY_MS * (0.8 + Math.random() * 0.4)), untilReachable: false };
    const retryAfter = retryAfterMs(err);
    if (retryAfter !== undefined) {
      this.backoff.next(); // still counts as a restart
      return { kind: 'retry', delayMs: retryAfter, untilReachable: false };
    }
    if (ctx.resuming && err instanceof ApiStatusError && err.statusCode !== 429) return { kind: 'relist', delayMs: this.backoff.next(), failed: true };
    return { kind: 'retry', delayMs: this.backoff.next(), untilReachable: isUnreachable(err) };
  }

  /**
   * The wait before resuming a watch the server ended (timeoutSeconds, a restart, a load balancer)
   * after `ranMs`: none, unless it keeps ending them as soon as they start (a proxy in between
   * cutting every watch?): the second quick end in a row waits at least `minMs`, and longer as it goes on.
   */
  afterEnd(ranMs: number, minMs: number): number {
    this.watchRan(ranMs);
    if (ranMs >= HEALTHY_WATCH_MS || this.quickEndsInARow++ === 0) return 0;
    return Math.max(minMs * (0.8 + Math.random() * 0.4), this.backoff.next());
  }
}

/** Retry-After of a 429 or 5xx, in milliseconds, within bounds; undefined when it does not apply. */
function retryAfterMs(err: unknown): number | undefined {
  if (!(err instanceof ApiStatusError) || (err.statusCode !== 429 && err.statusCode < 500) || err.retryAfterSeconds === undefined) return undefined;
  return Math.min(Math.max(err.retryAfterSeconds, RETRY_AFTER_MIN_S), RETRY_AFTER_MAX_S) * 1000;
}
