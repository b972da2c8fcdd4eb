// The composition root: listeners → limiter → router (the routing table) → routes → resolvers,
// caches and transports. Every way it can fail to start is a one-line StartupError.
import type { Logger } from '../core/log.js';
import { RouteConfigError, StartupError, errorMessage } from '../core/errors.js';
import { abortable } from '../core/abort.js';
import { testHookMs } from '../core/test-hooks.js';
import { formatHostPort, type HostPort } from '../core/address.js';
import { startForwardListeners, type ForwardListener } from '../listeners/forward-server.js';
import { isUnixAddress } from '../listeners/unix-socket.js';
import type { UnixListen } from '../listeners/server-base.js';
import type { CacheStatus } from '../cluster/cache.js';
import { Router } from '../routing/router.js';
import { generatePac } from '../routing/pac.js';
import { assertDirectAllowed } from '../routes/direct/route.js';
import { describeRoute, type RoutingTable } from '../routing/table-spec.js';
import { routeCondition, type Route } from '../routes/route.js';
import { startSocksListener } from '../listeners/socks-server.js';
import { startHttpListener } from '../listeners/http-server.js';
import { startOnLoopbacks } from '../listeners/loopbacks.js';
import type { Listener, ListenerContext } from '../listeners/listener.js';
import { ownKubeconfig, reloadOnNewCredentials, type CredentialSource } from './credential-reload.js';
import { buildTable, type BuildSettings, type BuiltTable } from './build-table.js';
import { PauseDetector } from '../core/pause-detector.js';
import { StreamStats } from '../listeners/stream-stats.js';
import { IngressHostFeed } from './ingress-feed.js';
import { StreamLimiter } from './limits.js';
import { clientsWithin, filesForClients, openFileLimit } from './file-limit.js';
import { ConnectionBudget } from '../listeners/connection-budget.js';
import { idleUpstreams, shedIdleUpstreams } from '../listeners/idle-upstreams.js';
import { DEFAULTS } from './options.js';
import type { ProxyOptions } from './options.js';
import type { RunningProxy } from './running.js';
import { ARGV_WARNING, ProxyAuth } from '../auth/credentials.js';
import { planStart, routingTableFor, type ListenSpec } from './startup-checks.js';
import { currentContextServed, EXEC_DIRECT_ORIGIN } from '../config/load.js';
import { startLive } from './live.js';
import { podFigures } from './tunnel-figures.js';
import { forwardWarnings, namespaceWarning } from './start-warnings.js';

export { routingTableFor };

export { probeApi } from '../routes/guest-cluster/guest-cluster.js';

export interface StartHooks {
  /** Called as soon as the default cluster's cache exists, before it syncs: `status` can then show its progress. */
  cacheStarting?(status: () => CacheStatus | undefined): void;
  /**
   * Aborted: the start is called off (a daemon told to stop during its first sync). What is bound
   * closes at once, routes included, and startProxy rejects once it has, not when the sync ends.
   */
  signal?: AbortSignal;
  /** Called once the listeners are bound, before the routes sync: where clients may connect already. */
  bound?(at: Listening): void;
  /**
   * Where refused credentials may have been renewed (credential-reload.ts); by default the
   * kubeconfig the proxy runs from. A managed daemon's is the user's, behind its own copy.
   */
  credentials?(running: RunningProxy): CredentialSource;
}

/** The addresses a proxy listens on (LPORT 0 resolved). */
export type Listening = Pick<RunningProxy, 'socks' | 'http' | 'forwards'>;

function listeningAt(listeners: readonly Listener[]): Listening {
  return {
    socks: listeners.find((l) => l.kind === 'socks')?.address,
    http: listeners.find((l) => l.kind === 'http')?.address,
    forwards: listeners
      .filter((l): l is ForwardListener => l.kind === 'forward')
      .map((l) => ({ address: l.address, target: formatHostPort(l.target.host, l.target.port) })),
  };
}

export async function startProxy(options: ProxyOptions, log: Logger, hooks: StartHooks = {}): Promise<RunningProxy> {
  const { socks: socksAddr, http: httpAddr, listens, table, forwards } = planStart(options);
  if (options.proxyAuth?.source === 'argv') log.warn(ARGV_WARNING);
  for (const line of table.deprecations ?? []) log.warn(line);
  const startedTable = table;

  const listeners: Listener[] = [];
  // Our own TCP addresses (mappings included), which a direct route must never dial back into.
  const bound = (): HostPort[] => listeners.filter((l) => !isUnixAddress(l.address)).map((l) => ({ host: l.address.address, port: l.address.port }));
  const keepalive = { intervalMs: options.keepaliveMs ?? DEFAULTS.keepaliveMs, timeoutMs: options.keepaliveTimeoutMs ?? DEFAULTS.keepaliveTimeoutMs };
  const settings: BuildSettings = {
    kubeconfig: options.kubeconfig,
    routeKubeconfigs: options.routeKubeconfigs,
    namespace: options.namespace,
    clusterDomain: options.clusterDomain,
    transport: options.transport ?? DEFAULTS.transport,
    keepalive,
    connectTimeoutMs: options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
    allowHostNetworkPods: options.allowHostNetworkPods ?? DEFAULTS.allowHostNetworkPods,
    apiChecked: options.apiChecked,
    ownListeners: bound,
  };
  let built = buildTable(table, settings, log);
  hooks.cacheStarting?.(() => defaultCluster(built)?.guest?.cacheStatus());
  const router = new Router(built, { connectTimeoutMs: options.connectTimeoutMs });
  // Cluster routes learn ingress hosts as they go: the table in force takes them, and so does a
  // table a reload is still checking (either may end up in force).
  const ingress = new IngressHostFeed(() => router.current, log);
  ingress.add(built);
  const stats = new StreamStats(log);
  const maxStreams = options.maxStreams ?? DEFAULTS.maxStreams;
  const idlePooled = { count: idleUpstreams, shed: shedIdleUpstreams };
  const limiter = new StreamLimiter(router, maxStreams, idlePooled);
  // Known within milliseconds (a shell on macOS), long before clients could use up the files.
  // Upstreams idle in the HTTP listener's pools hold files too (a WebSocket each), no slot.
  const connections = new ConnectionBudget(log, () => limiter.inUse + idleUpstreams(), idlePooled);
  void openFileLimit().then((limit) => {
    if (limit === undefined) return;
    connections.limit(clientsWithin(limit), filesForClients(limit), `all the open-file limit (ulimit -n) of ${limit} leaves for clients`);
    const fits = limiter.fitOpenFiles(limit);
    if (fits !== undefined)
      log.warn(
        { openFileLimit: limit, maxStreams: fits },
        `the open-file limit (ulimit -n) is ${limit}: at most ${fits} concurrent streams instead of ${maxStreams > 0 ? maxStreams : 'no limit'} (--max-streams); raise the limit to serve more`,
      );
  });
  const ctx: ListenerContext = { opener: limiter, stats, log, handshakeTimeoutMs: options.handshakeTimeoutMs, connections };
  if (options.proxyAuth) ctx.auth = new ProxyAuth(options.proxyAuth);
  // The one PAC generator of a running proxy: GET /proxy.pac (written for the address its browser
  // reached) and `pac ID` (over the control socket: as this machine's browsers see it).
  const pac = (reachedAt?: string) => {
    // Browsers cannot use a unix socket: the PAC file names TCP listeners only.
    const socks = listeners.find((l) => l.kind === 'socks' && !isUnixAddress(l.address))?.address;
    const http = listeners.find((l) => l.kind === 'http' && !isUnixAddress(l.address))?.address;
    const namespaces = defaultCluster(built)?.guest?.knownNamespaces();
    return generatePac(
      router.current.matcher,
      { ...(socks ? { socks: hostPort(socks) } : {}), ...(http ? { http: hostPort(http) } : {}), reachedAt },
      namespaces ? { namespaces } : {},
    );
  };
  ctx.pac = pac;

  const closeAll = async (graceMs: number) => {
    router.close();
    await Promise.all(listeners.map((l) => l.close(graceMs)));
    await Promise.all([...router.current.routes.values()].map((r) => r.close(true)));
  };
  try {
    // Listeners bind before the routes start (a taken port fails fast); early clients wait for
    // their route.
    // `localhost` binds 127.0.0.1 and ::1 (the first is the address the ready lines give).
    const bind = (spec: ListenSpec, start: (host: string | UnixListen, port: number) => Promise<Listener>) =>
      'unix' in spec ? start(listenAt(spec), 0).then((l) => [l]) : startOnLoopbacks(spec.host, spec.port, start, log, spec.flag);
    if (socksAddr) listeners.push(...(await bind(socksAddr, (h, p) => startSocksListener(h, p, ctx))));
    if (httpAddr) listeners.push(...(await bind(httpAddr, (h, p) => startHttpListener(h, p, ctx))));
    for (const f of forwards) listeners.push(...(await startForwardListeners(f.listen.host, f.listen.port, f.target, ctx, `${f.flag} ${f.text}`)));
    hooks.bound?.(listeningAt(listeners));
    // Called off (a stop during the first sync): a StartupError at once; binding is quick, so the
    // signal is checked here only, and the abandoned start settles as its routes close.
    const starting = startRoutes(built, log);
    await (hooks.signal ? abortable(starting, hooks.signal) : starting);
  } catch (err) {
    await closeAll(0);
    if (hooks.signal?.aborted) throw new StartupError('stopped while starting', { cause: err });
    throw err instanceof StartupError ? err : new StartupError(errorMessage(err), { cause: err });
  }
  // The default cluster as the table in force has it: a reload may make another route the default.
  const primary = () => defaultCluster(built)?.guest;
  const routes = () =>
    built.table.routes.map((spec) => {
      const status = built.routes.get(spec.name)!.status();
      const condition = routeCondition(status);
      return { ...status, ...(condition ? { condition } : {}), serves: describeRoute(built.table, spec), streams: stats.forRoute(spec.name) };
    });
  const warnings = [
    ...[await namespaceWarning(defaultCluster(built), options.namespace, built.table)].filter((w): w is string => w !== undefined),
    ...(await forwardWarnings(router, forwards)),
  ];
  for (const w of warnings) log.warn(w);
  const live = startLive(
    stats,
    listeners,
    ctx,
    () => ({ context: primary()?.context ?? '', namespace: primary()?.defaultNamespace ?? '', clusterDomain: built.table.clusterDomain }),
    routes,
    !!options.page,
    options.otherProxies,
  );
  log.info(
    {
      context: primary()?.context,
      namespace: primary()?.defaultNamespace,
      server: primary()?.server,
      routes: built.table.routes.map((r) => r.name),
      listeners: listeners.map(describeListener),
    },
    'proxy ready',
  );
  if (ctx.auth) log.info({ user: ctx.auth.username }, 'proxy authentication on: clients must present this user and its password');

  // Cluster routes a reload replaced, until their last stream has ended: their tunnels are open.
  const leaving = new Set<Route>();
  // After a sleep every route checks what it holds before a client waits on it (core/pause-detector.ts);
  // so do replaced ones for the streams they still carry.
  const pauses = new PauseDetector((pausedMs) => {
    log.info({ pausedMs }, 'the process did not run for a while (sleep?); checking watches and tunnels');
    for (const route of [...router.current.routes.values(), ...leaving]) route.afterPause?.(pausedMs);
  });
  pauses.start();
  let stopping: Promise<void> | undefined;
  let reloading: Promise<void> = Promise.resolve();
  const running: RunningProxy = {
    ...listeningAt(listeners),
    get context() {
      return primary()?.context ?? '';
    },
    get namespace() {
      return primary()?.defaultNamespace ?? '';
    },
    table: () => built.table,
    warnings,
    pac,
    routes,
    watch: (subscriber) => live.feed.subscribe(subscriber),
    ...(live.pageUrl ? { pageUrl: live.pageUrl } : {}),
    totals: () => stats.snapshot(),
    cacheStatus: () => defaultCluster(built)?.guest?.cacheStatus(),
    transports: () => podFigures([...built.routes.values(), ...leaving].filter((r) => r.transportStats)),
    reload(next?: { table: RoutingTable; routeKubeconfigs?: Record<string, string> }) {
      // One reload at a time; each sees the table the previous one left.
      const run = reloading.then(async () => {
        const table = next?.table ?? routingTableFor({ ...options, table: undefined, currentContext: currentContextServed(built.table) });
        if (JSON.stringify(table.forwards ?? []) !== JSON.stringify(startedTable.forwards ?? [])) {
          log.warn(
            { running: startedTable.forwards ?? [], file: table.forwards ?? [] },
            'the config file changed its port mappings: they take effect when the proxy restarts (a reload keeps its listeners)',
          );
        }
        // The settings change only with a reload that succeeds (built.settings is what is in force).
        const nextSettings = next?.routeKubeconfigs ? { ...built.settings, routeKubeconfigs: next.routeKubeconfigs } : built.settings;
        assertDirectAllowed(table, listens, !!options.proxyAuth);
        const candidate = buildTable(table, nextSettings, log, built);
        ingress.add(candidate);
        try {
          await startRoutes({ ...candidate, routes: new Map(candidate.fresh.map((r) => [r.name, r])) }, log, true, candidate.retried);
        } catch (err) {
          ingress.drop(candidate);
          for (const r of candidate.fresh) void r.close();
          throw err;
        }
        const previous = built;
        built = candidate;
        router.swap(candidate);
        ingress.drop(previous);
        // Routes that left the table close once their open streams end (reused ones stay).
        for (const [name, route] of previous.routes) {
          if (candidate.routes.get(name) === route) continue;
          const closed = route.close();
          if (!route.transportStats) continue;
          leaving.add(route);
          void closed.catch(() => undefined).then(() => leaving.delete(route));
        }
        log.info({ routes: table.routes.map((r) => r.name), added: candidate.fresh.map((r) => r.name) }, 'routing table reloaded');
      });
      reloading = run.catch(() => undefined);
      return run;
    },
    stop(graceMs: number) {
      stopping ??= (async () => {
        pauses.stop();
        renewals.stop();
        // Pages and watchers hear it before their streams go quiet (or end).
        live.feed.stopping();
        live.closePage();
        log.info({ openStreams: stats.snapshot().openStreams, graceMs }, 'stopping: no new connections, letting open streams finish');
        await closeAll(graceMs);
        // "N more like this" for lines held back in their window: it would end after the exit.
        stats.flushLog();
        connections.flushLog();
        // Watchers see the streams that finished in the grace close (the feed ran on till now).
        live.stop();
        log.info(stats.snapshot(), 'stopped');
      })();
      return stopping;
    },
  };
  // Refused credentials the kubeconfig has since renewed.
  const source =
    hooks.credentials?.(running) ??
    ownKubeconfig(
      () => built,
      () => running.reload({ table: built.table }),
    );
  const renewals = reloadOnNewCredentials(() => built, source, log);
  return running;
}

const hostPort = (a: { address: string; port: number }): HostPort => ({ host: a.address, port: a.port });

/** The default route when it is a cluster route: its context, cache and tunnels are what `status` shows first. */
function defaultCluster(built: BuiltTable): Route | undefined {
  const route = built.table.defaultRoute ? built.routes.get(built.table.defaultRoute) : undefined;
  return route?.kind === 'cluster' ? route : undefined;
}

/**
 * Starts every route (each one's `prepare` first, for all of them). With `strict` (a reload) any
 * failure rejects: a table is taken only when all its new clusters answer and sync — except for
 * routes in `tolerated` (made anew in place of failing ones), which may fail again and keep
 * trying. At first start the proxy runs as long as some route can serve (the others stay in
 * error and retry); it fails only when none can.
 */
async function startRoutes(
  built: Pick<BuiltTable, 'routes'> & { table?: RoutingTable },
  log: Logger,
  strict = false,
  tolerated: ReadonlySet<Route> = new Set(),
): Promise<void> {
  const routes = [...built.routes.values()];
  // exec's own direct route passes through only what CMD would dial itself: it is no route that
  // serves, so without any other the start fails as the foreground proxy's would.
  const implicit = new Set(built.table?.routes.filter((r) => r.kind === 'direct' && r.origin === EXEC_DIRECT_ORIGIN).map((r) => r.name));
  const counted = routes.filter((r) => !implicit.has(r.name));
  await Promise.all(routes.map((r) => r.prepare?.()));
  const results = await Promise.allSettled(routes.map((r) => (strict ? startForReload(r, log) : r.start())));
  const all = results.flatMap((r, i) => (r.status === 'rejected' ? [{ route: routes[i]!, err: r.reason as unknown }] : []));
  const failures = strict ? all.filter((f) => !tolerated.has(f.route)) : all;
  for (const f of all)
    if (strict && tolerated.has(f.route))
      log.warn({ route: f.route.name, error: errorMessage(f.err) }, 'route still not available after the reload; it keeps trying');
  if (failures.length === 0) return;
  const first = failures[0]!;
  const message = (f: { route: { name: string }; err: unknown }) =>
    counted.length > 1 ? `route ${f.route.name}: ${errorMessage(f.err)}` : errorMessage(f.err);
  // A route configured wrong stops the start at once, even when others could serve; one that
  // cannot reach its far end starts degraded and keeps trying (docs/usage.md, "Routes that cannot start").
  const misconfigured = failures.filter((f) => f.err instanceof RouteConfigError);
  if (!strict && misconfigured.length > 0) {
    throw new StartupError(misconfigured.map((f) => errorMessage(f.err)).join('; '), { cause: misconfigured[0]!.err });
  }
  if (strict || failures.length === routes.length || counted.every((r) => failures.some((f) => f.route === r))) {
    throw first.err instanceof StartupError && counted.length === 1 ? first.err : new StartupError(failures.map(message).join('; '), { cause: first.err });
  }
  for (const f of failures) log.warn({ route: f.route.name, error: errorMessage(f.err) }, 'route not available at start; the others serve, it keeps trying');
}

/**
 * A reload answers within reload.ts's 45 s: it waits this long for a new route's first sync. A
 * sync still getting further then (a big cluster, a slow link) goes on, and the route serves once
 * synced (its destinations wait meanwhile, as at start): failing it would only start it over.
 */
const RELOAD_SYNC_WAIT_MS = 35_000;
/** Test hook only (core/test-hooks.ts): how long a reload waits for a new route's first sync. */
export const TEST_RELOAD_SYNC_WAIT_ENV = 'KUBECTL_PROXYOUT_TEST_RELOAD_SYNC_WAIT_MS';

function startForReload(route: Route, log: Logger): Promise<void> {
  const started = route.start();
  const waitMs = testHookMs(TEST_RELOAD_SYNC_WAIT_ENV) ?? RELOAD_SYNC_WAIT_MS;
  let timer: NodeJS.Timeout | undefined;
  const syncingOn = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      if (route.status().state !== 'syncing') return;
      // Swapped in syncing: a later failure of this first start is no reload's error to report
      // (its lifecycle retries it; it logs only retries).
      started.catch((err: unknown) => {
        if (route.status().state === 'error') log.warn({ route: route.name, error: errorMessage(err) }, 'route not available; trying again later');
      });
      log.warn({ route: route.name }, 'route still syncing after the reload; it serves once synced');
      resolve();
    }, waitMs);
  });
  return Promise.race([started, syncingOn]).finally(() => clearTimeout(timer));
}

const listenAt = (spec: ListenSpec): string | UnixListen => ('unix' in spec ? { unix: spec.unix } : spec.host);

function describeListener(l: Listener): string {
  if (isUnixAddress(l.address)) return `${l.kind} unix:${l.address.address}`;
  const where = formatHostPort(l.address.address, l.address.port);
  return l.kind === 'forward'
    ? `forward ${where}=${formatHostPort((l as ForwardListener).target.host, (l as ForwardListener).target.port)}`
    : `${l.kind} ${where}`;
}
