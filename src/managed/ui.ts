// `ui`: the live page of every managed proxy of this user. Each browser that opens the event
// stream gets, per running proxy, the feed that proxy streams over its control socket (`watch`,
// managed/control.ts): its snapshot, then its events. The registry is read again every RESCAN_MS
// for proxies started (or stopped) since; a feed that ends is reported as `gone` with why. A
// daemon started by a version without the feed refuses `watch`: said once, not followed again.
import type { PageHub, PageMessage } from '../ui/page-server.js';
import { withStateLock } from '../state/lock.js';
import { stateDirExists, StateDirError, type StateLayout } from '../state/paths.js';
import { unknownCommand, watchProxy, type Watch } from './control.js';
import { inspect } from './registry.js';
import { controlSocketOf, listIds } from './store.js';

const RESCAN_MS = 3_000;

/** A proxy that runs now (a starting one joins once it serves), or one a newer version started (newer: what to say). */
export type Listed = { id: string; createdAt: string; controlSocket: string; newer?: undefined } | { id: string; newer: string };

export async function runningProxies(l: StateLayout): Promise<Listed[]> {
  if (!stateDirExists(l)) return [];
  return withStateLock(l, () =>
    listIds(l).flatMap((id): Listed[] => {
      try {
        const found = inspect(l, id);
        return found?.state === 'running' ? [{ id, createdAt: found.entry.createdAt, controlSocket: controlSocketOf(l, found.entry) }] : [];
      } catch (err) {
        // Not a reason to show none of the others (a newer version's entry, one we cannot read).
        if (err instanceof StateDirError) return [{ id, newer: err.message }];
        throw err;
      }
    }),
  );
}

export function managedHub(l: StateLayout, rescanMs = RESCAN_MS): PageHub {
  return {
    subscribe(send: (message: PageMessage) => void): () => void {
      const watches = new Map<string, Watch>();
      // id → createdAt of a proxy whose daemon has no feed: followed again only once replaced.
      const noFeed = new Map<string, string>();
      // Proxies of a newer version, said once while they are there.
      let newer = new Set<string>();
      let closed = false;
      const follow = (id: string, createdAt: string, controlSocket: string): void => {
        let stopping = false;
        const watch = watchProxy(controlSocket, (message) => {
          if (message.type === 'stopping') stopping = true;
          if (!closed) send({ ...message, proxy: id });
        });
        watches.set(id, watch);
        void watch.ended.then(async (why) => {
          if (watches.get(id) !== watch) return;
          let reason: string;
          if (why === unknownCommand('watch')) {
            noFeed.set(id, createdAt);
            reason = `not shown: it runs, but was started by an earlier kubectl-proxyout, which has no live feed; to see it here, restart it: kubectl proxyout disconnect ${id}, then connect`;
          } else reason = stopping ? why : await diedWhy(l, id, why);
          watches.delete(id);
          if (!closed) send({ type: 'gone', proxy: id, reason });
        });
      };
      let scanning = false;
      const scan = async (): Promise<void> => {
        if (scanning || closed) return;
        scanning = true;
        try {
          const listed = await runningProxies(l);
          const told = newer;
          newer = new Set(listed.filter((x) => x.newer !== undefined).map((x) => x.id));
          for (const x of listed) {
            if (closed) break;
            if (x.newer !== undefined) {
              if (!told.has(x.id)) send({ type: 'gone', proxy: x.id, reason: `not shown: ${x.newer}` });
            } else if (!watches.has(x.id) && noFeed.get(x.id) !== x.createdAt) follow(x.id, x.createdAt, x.controlSocket);
          }
        } catch {
          /* the registry is being rewritten or locked: the next scan sees it */
        } finally {
          scanning = false;
        }
      };
      void scan();
      const timer = setInterval(() => void scan(), rescanMs);
      timer.unref();
      return () => {
        closed = true;
        clearInterval(timer);
        for (const watch of watches.values()) watch.close();
        watches.clear();
      };
    },
  };
}

/**
 * Why a feed that ended without `stopping` ended: a daemon that is no more died (killed, out of
 * memory, crashed), which "closed its feed" would hide; its log has the rest.
 */
async function diedWhy(l: StateLayout, id: string, why: string): Promise<string> {
  try {
    const found = await withStateLock(l, () => inspect(l, id));
    if (found?.state !== 'dead') return why;
    return `the daemon${found.entry.pid !== undefined ? ` (pid ${found.entry.pid})` : ''} exited without stopping (killed or crashed): see kubectl proxyout logs ${id}`;
  } catch {
    return why;
  }
}
