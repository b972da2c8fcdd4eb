// A daemon's state entry is the only handle on it: `status`, `disconnect` and `quit` find it there.
// One whose entry was removed under it (`rm -rf` of the state directory, `disconnect --forget` from
// another machine or container, a `connect` that took the ID meanwhile) went on serving invisible,
// holding its ports, with nothing left to stop it but `kill`. It looks every few seconds and stops
// once its entry is gone or another's; an entry it cannot read (permissions, a newer version's)
// says nothing about that, and it goes on.
import type { StateLayout } from '../state/paths.js';
import { testHookMs } from '../core/test-hooks.js';
import { readEntry } from './store.js';

/** Test hook (core/test-hooks.ts testHookMs): how often the daemon looks at its state entry. */
export const TEST_ENTRY_CHECK_ENV = 'KUBECTL_PROXYOUT_TEST_ENTRY_CHECK_MS';
const CHECK_EVERY_MS = 5_000;

/** ours: still the entry the daemon was started from · gone · replaced: another proxy's under the ID · unknown: unreadable now. */
export type Ownership = 'ours' | 'gone' | 'replaced' | 'unknown';

export function entryOwnership(l: StateLayout, id: string, createdAt: string): Ownership {
  try {
    const entry = readEntry(l, id);
    if (!entry) return 'gone';
    return entry.createdAt === createdAt ? 'ours' : 'replaced';
  } catch {
    return 'unknown';
  }
}

/** Calls lost (once) when the entry is gone or replaced; returns the function that stops looking. */
export function watchOwnEntry(l: StateLayout, id: string, createdAt: string, lost: (how: 'gone' | 'replaced') => void): () => void {
  const timer = setInterval(
    () => {
      const now = entryOwnership(l, id, createdAt);
      if (now !== 'gone' && now !== 'replaced') return;
      clearInterval(timer);
      lost(now);
    },
    testHookMs(TEST_ENTRY_CHECK_ENV) ?? CHECK_EVERY_MS,
  );
  timer.unref();
  return () => clearInterval(timer);
}
