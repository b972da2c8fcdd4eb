// `disconnect` and `quit`: stop a managed daemon and remove its entry (state, kubeconfig,
// socket); its log stays. One that runs elsewhere (registry.ts) cannot be signalled from here:
// it is left alone, or with --forget its entry is dropped (it stops there, entry-watch.ts). The
// pid is signalled only after checking it still is our daemon (start identity + command line,
// state/process.ts): SIGTERM (Windows: a stop request on its control pipe), up to the drain time
// and a second for a graceful exit (stop-budget.ts: the daemon plans to be gone by then), then
// SIGKILL — under the state lock, so never while the daemon holds it. The lock is not held while
// waiting, because the daemon takes it to record "stopping" and to remove its own entry.
import { existsSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { ID_PATTERN, StateDirError, type StateLayout } from '../state/paths.js';
import { withStateLock } from '../state/lock.js';
import { isAlive, isOurDaemon, systemHost } from '../state/process.js';
import { controlRequest } from './control.js';
import { bestEffortWrite, listIds, readEntry, removeEntry, updateEntry, type ProxyEntry } from './store.js';
import { ElsewhereError, inspect } from './registry.js';
import { KILL_WAIT_MS, termWaitMs } from './stop-budget.js';
import { monotonicMs } from '../core/clock.js';

/** …, forgotten: an entry from elsewhere dropped unsignalled · left-elsewhere: --all without --forget passed it by. */
export type StopOutcome = 'stopped' | 'killed' | 'was-dead' | 'forgotten' | 'left-elsewhere';

export interface Stopped {
  id: string;
  entry: ProxyEntry;
  outcome: StopOutcome;
}

export class UnknownIdError extends Error {
  constructor(readonly id: string) {
    super(`no managed proxy with ID ${id} (see kubectl proxyout status)`);
    this.name = 'UnknownIdError';
  }
}

/** forget: an entry that runs elsewhere (another machine or container) is dropped, unsignalled, instead of refused. */
export async function stopProxy(l: StateLayout, id: string, opts: { forget?: boolean } = {}): Promise<Stopped> {
  const signalled = await withStateLock(l, () => {
    const current = inspect(l, id);
    if (!current) throw new UnknownIdError(id);
    if (current.state === 'elsewhere') {
      if (!opts.forget) throw new ElsewhereError(current.entry, 'disconnect it');
      removeEntry(l, id);
      return { entry: current.entry, pid: undefined, forgotten: true };
    }
    if (current.state === 'dead') {
      removeEntry(l, id);
      return { entry: current.entry, pid: undefined };
    }
    // inspect() has just verified pid, start identity and command line.
    const pid = current.entry.pid!;
    // Asked to stop already (another `disconnect` or `quit` under way): a second SIGTERM would
    // make it exit without letting its open streams finish. Wait for it as that one does.
    if (current.entry.phase === 'stopping') return { entry: current.entry, pid };
    // Recorded before the signal, not left to the daemon: a `connect` for this ID from now on
    // waits for it to go instead of reporting it "already running". Not at the price of the stop:
    // on a full disk the daemon is stopped all the same (removing needs no space).
    bestEffortWrite(() => updateEntry(l, id, (e) => (e.phase = 'stopping')));
    let sent: boolean;
    try {
      sent = process.platform === 'win32' || signal(pid, 'SIGTERM');
    } catch (err) {
      // Not ours to signal after all (EPERM): it goes on running, so it is not stopping.
      bestEffortWrite(() => updateEntry(l, id, (e) => (e.phase = current.entry.phase)));
      throw err;
    }
    if (!sent) {
      removeEntry(l, id);
      return { entry: current.entry, pid: undefined };
    }
    return { entry: current.entry, pid };
  });
  const { entry, pid } = signalled;
  if (pid === undefined) return { id, entry, outcome: 'forgotten' in signalled ? 'forgotten' : 'was-dead' };
  if (process.platform === 'win32') await askToStop(pid, l.controlSocket(id), 'win32');

  let outcome: StopOutcome = 'stopped';
  if (!(await waitForExit(pid, termWaitMs(entry.options.shutdownGraceMs))) && (await killUnderLock(l, pid, entry))) {
    outcome = 'killed';
    await waitForExit(pid, KILL_WAIT_MS);
  }
  await withStateLock(l, () => {
    // The daemon removes its own entry on a graceful exit; after SIGKILL we do. Leave alone a
    // new entry a concurrent `connect` may have created for the same ID meanwhile.
    const now = readEntry(l, id);
    if (!now || now.createdAt === entry.createdAt) bestEffortWrite(() => removeEntry(l, id));
  });
  return { id, entry, outcome };
}

/**
 * SIGKILL, taken under the state lock: the daemon cannot hold it then (recording its phase,
 * removing its entry), so the kill never leaves the lock for everyone to wait out (proper-lockfile
 * takes a dead holder's lock over only when it is 10 s stale). A daemon that exits while we wait
 * for the lock is not killed. A lock nobody lets go of for ~19 s is most likely held by this
 * daemon, hung: it is killed anyway. False when there was nothing to kill.
 */
async function killUnderLock(l: StateLayout, pid: number, entry: ProxyEntry): Promise<boolean> {
  const kill = () => isOurDaemon(pid, entry.procIdentity, entry.id, systemHost, entry.program) && signal(pid, 'SIGKILL');
  try {
    return await withStateLock(l, kill);
  } catch (err) {
    if (err instanceof StateDirError) return kill();
    throw err;
  }
}

/**
 * Stops every managed proxy (in parallel) that runs here; those that run elsewhere are left alone,
 * or with forget dropped. With sweep, also removes anything else under proxies/.
 */
export async function stopAll(l: StateLayout, opts: { sweep?: boolean; forget?: boolean } = {}): Promise<Stopped[]> {
  const ids = await withStateLock(l, () => listIds(l));
  // Every stop runs to its end before one's error (a newer version's entry, store.ts) is thrown:
  // the command exits on it, and would cut the others short.
  const settled = await Promise.allSettled(
    ids.map((id) =>
      stopProxy(l, id, { forget: opts.forget }).catch((err: unknown): Stopped | undefined => {
        if (err instanceof UnknownIdError) return undefined; // gone meanwhile
        if (err instanceof ElsewhereError) return { id, entry: err.entry, outcome: 'left-elsewhere' };
        throw err;
      }),
    ),
  );
  const results = settled.map((r) => (r.status === 'fulfilled' ? r.value : undefined));
  const failed = settled.find((r) => r.status === 'rejected');
  if (opts.sweep) {
    await withStateLock(l, () => {
      // Whatever no live entry accounts for (junk directories, temporary files of an interrupted
      // write), but never an entry a concurrent `connect` created meanwhile.
      for (const name of existsSync(l.proxiesDir) ? readdirSync(l.proxiesDir) : []) {
        if (ID_PATTERN.test(name) && kept(l, name)) continue;
        rmSync(path.join(l.proxiesDir, name), { recursive: true, force: true });
      }
    });
  }
  const stopped = results.filter((r): r is Stopped => r !== undefined);
  if (failed) throw new PartlyStoppedError(stopped, failed.reason as Error);
  return stopped;
}

/** An entry that stays: this version's, a newer one's (only that version may remove it), or one we cannot read. */
function kept(l: StateLayout, id: string): boolean {
  try {
    return readEntry(l, id) !== undefined;
  } catch (err) {
    if (err instanceof StateDirError) return true;
    throw err;
  }
}

/** stopAll's failure after it stopped what it could: the commands say what stopped, then why not the rest. */
export class PartlyStoppedError extends Error {
  constructor(
    readonly stopped: Stopped[],
    readonly reason: Error,
  ) {
    super(reason.message);
    this.name = 'PartlyStoppedError';
  }
}

/**
 * A graceful stop where signals cannot ask for one. On Windows process.kill(pid, 'SIGTERM') ends
 * the process at once (TerminateProcess: no drain, no clean-up), so the daemon is asked over its
 * control pipe, as `{"cmd":"stop"}`; only when it does not answer is it terminated. Elsewhere
 * SIGTERM is that request. Returns how it was asked.
 */
export async function askToStop(pid: number, endpoint: string, platform: NodeJS.Platform = process.platform): Promise<'control' | 'signal' | 'gone'> {
  if (platform === 'win32') {
    const answer = await controlRequest(endpoint, { cmd: 'stop' }).catch(() => undefined);
    if (answer?.ok) return 'control';
  }
  return signal(pid, 'SIGTERM') ? 'signal' : 'gone';
}

/** False when the process is already gone (it exited between the check and the signal). */
export function signal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/** On the monotonic clock: the date set back an hour meanwhile kept a hung daemon an hour; forward, killed it at once. */
async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = monotonicMs() + timeoutMs;
  while (isAlive(pid)) {
    if (monotonicMs() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}
