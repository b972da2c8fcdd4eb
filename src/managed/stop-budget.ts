// How long a managed daemon's stop may take, in one place for both sides: `disconnect` and
// `quit` (stop.ts) SIGKILL a daemon still running termWaitMs() after their SIGTERM, and the daemon
// (daemon.ts) plans its shutdown from the moment it sees the stop so that it is over before then —
// drained, its entry removed, the state lock released. A daemon killed while it held the lock
// left it to proper-lockfile's stale time (10 s), and every other command waited that long.
//
// Unbounded, the shutdown took up to: the lock to record "stopping" (~19 s of retries when another
// command holds it), the listeners' grace, the routes closing, the control socket closing — which
// waited for a reload in progress, its new routes' sync (up to 35 s) or reload's own timeout (45 s) —
// and the lock again to remove the entry (~19 s). Measured: a reload in progress, or another
// command holding the lock for a few seconds, got the daemon killed at 5 s.
// Now each wait has its deadline here; stop.ts also kills under the lock (the daemon cannot be
// holding it then), so not even a daemon over its budget is killed holding it.

/** Wait at least this long for a graceful exit before SIGKILL (longer if the drain time is). */
export const MIN_TERM_WAIT_MS = 5_000;
/** After the listeners' grace: the routes and control socket close, the entry goes, the log is flushed. */
export const AFTER_GRACE_MS = 1_000;
/** After SIGKILL: how long the stopper waits for the process to be gone. */
export const KILL_WAIT_MS = 2_000;
/** The daemon's steps after the drain (control socket, entry, log): they begin this long before the kill. */
const FINISH_MS = 600;
/** No state lock is waited for or taken closer than this to the kill (a section takes milliseconds). */
const LOCK_MARGIN_MS = 300;
/** Open control connections (a `status`, a reload being answered) get this long to end. */
export const CONTROL_CLOSE_MS = 200;

/** How long `disconnect`/`quit` wait after SIGTERM (or a stop request) before SIGKILL. */
export function termWaitMs(graceMs: number): number {
  return Math.max(MIN_TERM_WAIT_MS, graceMs + AFTER_GRACE_MS);
}

export interface ShutdownPlan {
  /** The drain — the listeners' grace, then the routes closing — is cut off here. */
  drainUntil: number;
  /** The state lock is given up on (not waited for, not taken) from here on. */
  lockUntil: number;
}

/**
 * The daemon's deadlines for a stop seen at seenAt (epoch ms). The stopper signalled before that,
 * so its kill comes no earlier than seenAt + termWaitMs less the signal's delivery, which the
 * margins cover in normal operation. The listeners always get their whole grace.
 */
export function shutdownPlan(graceMs: number, seenAt: number): ShutdownPlan {
  const killAt = seenAt + termWaitMs(graceMs);
  return { drainUntil: killAt - FINISH_MS, lockUntil: killAt - LOCK_MARGIN_MS };
}

/** Whether `work` settles by `until` (epoch ms); it goes on either way, its failure ignored. */
export async function settlesBy(until: number, work: Promise<unknown> | undefined): Promise<boolean> {
  if (!work) return true;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, until - Date.now()))));
  try {
    return await Promise.race([
      work.then(
        () => true as const,
        () => true as const,
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
