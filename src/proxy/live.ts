// The proxy's live feed (ui/feed.ts: what `watch` on a managed proxy's control socket streams)
// and, for a foreground proxy with an HTTP listener on TCP, its own live page at / on that
// listener (ui/page-server.ts), with a token made at start.
import type { Listener, ListenerContext } from '../listeners/listener.js';
import type { ForwardListener } from '../listeners/forward-server.js';
import { target } from '../listeners/stream-stats.js';
import type { StreamStats } from '../listeners/stream-stats.js';
import { formatAddress } from '../listeners/bound-address.js';
import { PAC_PATH } from '../listeners/pac-file.js';
import { isUnixAddress } from '../listeners/unix-socket.js';
import { apiServersOf, type RouteStatus } from '../routes/route.js';
import { exportLines, exportedVariables } from './client-env.js';
import { LiveFeed, type ProxyView } from '../ui/feed.js';

/** The proxy serving the page among the managed ones it shows (ui/page/page.js has the same key). */
export const THIS_PROXY = ':this';
import { newPageToken } from '../ui/page-access.js';
import { browserOrigin, claimsRequest, combineHubs, pageHandler, pageUrl, type PageHandler, type PageHub } from '../ui/page-server.js';

/** Where the page's env lines put the password. */
export const PASSWORD = 'PASSWORD';

export interface Live {
  feed: LiveFeed;
  /** The page's URL with its token, when this proxy serves one. */
  pageUrl?: string;
  /** Ends the page's event streams (at stop: a browser left open must not hold the drain). */
  closePage(): void;
  /** Sends what is held and stops the timers: once the streams have finished. */
  stop(): void;
}

export function startLive(
  stats: StreamStats,
  listeners: readonly Listener[],
  ctx: ListenerContext,
  view: () => Pick<ProxyView, 'context' | 'namespace'> & { clusterDomain: string },
  routes: () => RouteStatus[],
  servePage: boolean,
  otherProxies?: PageHub,
): Live {
  const startedAt = new Date().toISOString();
  const tcp = (kind: Listener['kind']) => listeners.find((l) => l.kind === kind && !isUnixAddress(l.address));
  const feed = new LiveFeed({
    proxy: () => {
      const socks = listeners.find((l) => l.kind === 'socks');
      const http = listeners.find((l) => l.kind === 'http');
      const pacAt = tcp('http');
      // As the ready lines have them, the password never: the user has it, the page shows where it goes.
      const { clusterDomain, ...shown } = view();
      const env = exportLines(
        exportedVariables({ socks: socks?.address, http: http?.address, apiServers: apiServersOf(routes()), clusterDomain }, ctx.auth?.username, PASSWORD),
      );
      return {
        pid: process.pid,
        startedAt,
        ...shown,
        ...(socks ? { socks: formatAddress(socks.address) } : {}),
        ...(http ? { http: formatAddress(http.address) } : {}),
        forwards: listeners
          .filter((l): l is ForwardListener => l.kind === 'forward')
          .map((l) => ({ listen: formatAddress(l.address), target: target(l.target) })),
        auth: ctx.auth !== undefined,
        ...(env.length ? { env } : {}),
        ...(pacAt ? { pacUrl: `${browserOrigin(pacAt.address)}${PAC_PATH}` } : {}),
      };
    },
    routes,
    totals: () => stats.snapshot(),
    openRecords: () => stats.openRecords(),
  });
  stats.observer = feed;
  feed.start();
  let page: PageHandler | undefined;
  let url: string | undefined;
  const http = tcp('http');
  if (servePage && http) {
    const token = newPageToken();
    // A key no connection ID can be (state/paths.ts ID_PATTERN): managed proxies share the page.
    const own = hubOf(feed, THIS_PROXY);
    page = pageHandler(token, otherProxies ? combineHubs([own, otherProxies]) : own);
    ctx.page = { claims: claimsRequest, serve: page };
    url = pageUrl(http.address, token);
  }
  return {
    feed,
    ...(url ? { pageUrl: url } : {}),
    closePage: () => page?.close(),
    stop: () => {
      feed.flush();
      feed.stop();
      page?.close();
    },
  };
}

/** One proxy's feed as the page's hub. */
export function hubOf(feed: LiveFeed, proxy: string): PageHub {
  return { subscribe: (send) => feed.subscribe((message) => send({ ...message, proxy })) };
}
