// Which API servers refused a watch-list (KEP-3157; older than 1.27, or the WatchList gate off),
// and when. A relist asks again once the refusal is WATCH_LIST_RELEARN_MS old: the control plane
// may have been upgraded, or the gate turned on, under a proxy that runs for days.
import type { ApiConnection } from './api.js';
import { monotonicMs } from '../core/clock.js';
import { testHookMs } from '../core/test-hooks.js';

const WATCH_LIST_RELEARN_MS = testHookMs('PROXYOUT_TEST_RELEARN_WATCH_LIST_MS') ?? 10 * 60_000;
/** When (monotonic ms) each API connection's server last refused a watch-list. */
const refusedAt = new WeakMap<ApiConnection, number>();

/** Worth a watch-list: never refused here, or refused long enough ago to ask again. */
export function mayWatchList(api: ApiConnection): boolean {
  const at = refusedAt.get(api);
  return at === undefined || monotonicMs() - at >= WATCH_LIST_RELEARN_MS;
}

export function watchListRefused(api: ApiConnection): void {
  refusedAt.set(api, monotonicMs());
}

/** A watch-list went through; true when this server had refused one before. */
export function watchListAccepted(api: ApiConnection): boolean {
  return refusedAt.delete(api);
}
