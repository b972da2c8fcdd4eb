// The managed proxies as the CLI sees them: state.json entries checked against the processes
// that really run. Every command that lists state reaps what a crash left behind: an entry whose
// daemon is gone loses its kubeconfig and socket at once and stays as a "dead" record (so
// `status` can say so) until `disconnect`, `quit` or a new `connect` for the ID removes it.
// An entry recorded in another process space (another machine or container sharing the state
// directory, state/process-space.ts) is "elsewhere": its pid cannot be checked here, so it is
// never reaped here; only `disconnect ID --forget` drops it.
import { existsSync } from 'node:fs';
import type { StateLayout } from '../state/paths.js';
import { isOurDaemon, systemHost } from '../state/process.js';
import { compareSpace } from '../state/process-space.js';
import { bestEffortWrite, listIds, readEntry, removeEntry, removeTransient, updateEntry, type ProxyEntry } from './store.js';

export type LiveState = 'starting' | 'running' | 'stopping' | 'dead' | 'elsewhere';

export interface Inspected {
  entry: ProxyEntry;
  state: LiveState;
}

/**
 * Whether the entry's daemon runs (pid alive, same start identity, our command line), or runs
 * where its pid cannot be checked.
 * Only meaningful under the state lock: an entry without a pid is then an orphan of a `connect`
 * that died between writing it and starting the daemon.
 */
export function liveState(entry: ProxyEntry): LiveState {
  if (entry.phase === 'dead' || entry.phase === 'failed') return 'dead';
  if (compareSpace(entry.space) === 'elsewhere') return 'elsewhere';
  if (entry.pid === undefined) return 'dead';
  if (!isOurDaemon(entry.pid, entry.procIdentity, entry.id, systemHost, entry.program)) return 'dead';
  return entry.phase;
}

/** Inspects one ID; a dead entry becomes a tombstone (credentials and socket removed). Call under the lock. */
export function inspect(l: StateLayout, id: string): Inspected | undefined {
  const entry = readEntry(l, id);
  if (!entry) {
    // A directory without a readable state.json cannot be a live proxy: remove it.
    if (existsSync(l.proxyDir(id))) bestEffortWrite(() => removeEntry(l, id));
    return undefined;
  }
  const state = liveState(entry);
  if (state === 'dead' && entry.phase !== 'dead') {
    removeTransient(l, id);
    const why =
      entry.phase === 'failed'
        ? entry.error
        : entry.pid === undefined
          ? 'connect was interrupted before the daemon started'
          : `the daemon (pid ${entry.pid}) is gone`;
    // Said dead also where it cannot be recorded (a read-only state directory).
    let dead: ProxyEntry | undefined;
    bestEffortWrite(() => (dead = updateEntry(l, id, (e) => ((e.phase = 'dead'), (e.error = why)))));
    return { entry: dead ?? { ...entry, phase: 'dead', error: why }, state };
  }
  if (state === 'dead') removeTransient(l, id);
  return { entry, state };
}

/** "recorded on host H, …": where an entry that runs elsewhere was made, for messages. */
export function whereItRuns(entry: Pick<ProxyEntry, 'space'>): string {
  return recordedOn(entry.space?.hostname);
}

/** The same from the host name alone (a status row's). */
export function recordedOn(hostname: string | undefined): string {
  return `recorded on host ${hostname ?? 'unknown'}, by another machine or container that shares this state directory`;
}

/** What cannot be done from here to a proxy that runs elsewhere; `doing` is what to do there instead ("disconnect it"). */
export class ElsewhereError extends Error {
  constructor(
    readonly entry: ProxyEntry,
    doing: string,
  ) {
    super(`proxy ${entry.id} runs elsewhere (${whereItRuns(entry)}): ${doing} there, or forget it here with: kubectl proxyout disconnect ${entry.id} --forget`);
    this.name = 'ElsewhereError';
  }
}

/** Every managed proxy, reaped. Call under the lock. */
export function inspectAll(l: StateLayout): Inspected[] {
  return listIds(l)
    .map((id) => inspect(l, id))
    .filter((x): x is Inspected => x !== undefined);
}
