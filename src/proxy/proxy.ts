import type { Logger } from '../core/log.js';
import { StartupError, errorMessage } from '../core/errors.js';
import { parseListenAddress } from '../core/address.js';
import { loadKubeConfig } from '../cluster/kubeconfig.js';
import { ApiConnection, ApiStatusError } from '../cluster/api.js';
import { ClusterCache, type CacheStatus } from '../cluster/cache.js';
import { WebSocketV4Transport } from '../tunnel/websocket-v4.js';
import { SpdyTransport } from '../tunnel/spdy-transport.js';
import { NegotiatingTransport } from '../tunnel/negotiate.js';
import { Resolver } from '../routing/resolver.js';
import { ClusterRoute } from '../routing/cluster-route.js';
import { Router } from '../routing/router.js';
import { startSocksListener } from '../listeners/socks-server.js';
import { startHttpListener } from '../listeners/http-server.js';
import type { Listener, ListenerContext } from '../listeners/listener.js';
import { StreamStats } from './stats.js';
import { StreamLimiter } from './limits.js';
import { DEFAULTS } from './options.js';
import type { ProxyOptions } from './options.js';
import type { RunningProxy } from './running.js';
import { ARGV_WARNING, ProxyAuth, requireCredentialsOffLoopback } from '../auth/credentials.js';

/** Wait this long for a dial error on ports a pod does not declare (see ClusterRoute). */
const CONFIRM_UNDECLARED_PORT_MS = 150;
const STARTUP_SYNC_TIMEOUT_MS = 30_000;

/**
 * Builds the data path — listeners → router → cluster route → resolver (watch cache) → transport —
 * and starts it. Every way it can fail to start is a one-line StartupError.
 */
export interface StartHooks {
  /** Called as soon as the cluster cache exists, before it syncs: `status` can then show its progress. */
  cacheStarting?(status: () => CacheStatus): void;
}

export async function startProxy(options: ProxyOptions, log: Logger, hooks: StartHooks = {}): Promise<RunningProxy> {
  if (!options.listenSocks && !options.listenHttp) throw new StartupError('nothing to listen on: give --listen-socks and/or --listen-http');
  const socksAddr = options.listenSocks ? parseAddress(options.listenSocks, '--listen-socks') : undefined;
  const httpAddr = options.listenHttp ? parseAddress(options.listenHttp, '--listen-http') : undefined;
  requireCredentialsOffLoopback([...(socksAddr ? [{ flag: '--listen-socks', ...socksAddr }] : []), ...(httpAddr ? [{ flag: '--listen-http', ...httpAddr }] : [])], !!options.proxyAuth);
  if (options.proxyAuth?.source === 'argv') log.warn(ARGV_WARNING);
  const kube = loadKubeConfig(options);
  const api = new ApiConnection(kube.kc);
  await probeApi(api, kube.context, kube.server);

  const cache = new ClusterCache(api, log, kube.namespace);
  hooks.cacheStarting?.(() => cache.status());
  const keepalive = {
    intervalMs: options.keepaliveMs ?? DEFAULTS.keepaliveMs,
    timeoutMs: options.keepaliveTimeoutMs ?? DEFAULTS.keepaliveTimeoutMs,
  };
  const websocket = new WebSocketV4Transport(api, log, keepalive);
  const spdy = new SpdyTransport(api, log, { keepalive, connectTimeoutMs: options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs });
  const transport = new NegotiatingTransport(options.transport ?? DEFAULTS.transport, spdy, websocket, log, kube.context);
  // Tunnels belong to pod instances: one the cache sees go is closed, not left to fail streams.
  cache.lookup.onPodGone = (namespace, pod, uid) => transport.podGone({ namespace, pod, uid });
  const resolver = new Resolver(cache, options.clusterDomain, undefined, { allowHostNetworkPods: options.allowHostNetworkPods });
  const route = new ClusterRoute(kube.context, resolver, transport, log, { confirmMs: CONFIRM_UNDECLARED_PORT_MS, reopenTimeoutMs: options.connectTimeoutMs });
  // Listeners bind before the cache syncs (a taken port fails fast); early clients wait for it.
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const router = new Router([route], { connectTimeoutMs: options.connectTimeoutMs, ready });
  const stats = new StreamStats(log);
  const limiter = new StreamLimiter(router, options.maxStreams ?? DEFAULTS.maxStreams);
  const ctx: ListenerContext = { opener: limiter, stats, log, handshakeTimeoutMs: options.handshakeTimeoutMs };
  if (options.proxyAuth) ctx.auth = new ProxyAuth(options.proxyAuth);

  const listeners: Listener[] = [];
  const release = async () => {
    router.close();
    await Promise.all(listeners.map((l) => l.close(0)));
    await transport.close();
    await cache.stop();
  };
  try {
    if (socksAddr) listeners.push(await startSocksListener(socksAddr.host, socksAddr.port, ctx));
    if (httpAddr) listeners.push(await startHttpListener(httpAddr.host, httpAddr.port, ctx));
    await syncCache(cache, kube.server);
    markReady();
  } catch (err) {
    await release();
    throw err instanceof StartupError ? err : new StartupError(errorMessage(err), { cause: err });
  }
  log.info({ context: kube.context, namespace: kube.namespace, server: kube.server, listeners: listeners.map((l) => `${l.kind} ${l.address.address}:${l.address.port}`) }, 'proxy ready');
  if (ctx.auth) log.info({ user: ctx.auth.username }, 'proxy authentication on: clients must present this user and its password');

  let stopping: Promise<void> | undefined;
  return {
    socks: listeners.find((l) => l.kind === 'socks')?.address,
    http: listeners.find((l) => l.kind === 'http')?.address,
    context: kube.context,
    namespace: kube.namespace,
    totals: () => stats.snapshot(),
    cacheStatus: () => cache.status(),
    transports: () => transport.stats(),
    stop(graceMs: number) {
      stopping ??= (async () => {
        router.close();
        log.info({ openStreams: stats.snapshot().openStreams, graceMs }, 'stopping: no new connections, letting open streams finish');
        await Promise.all(listeners.map((l) => l.close(graceMs)));
        await transport.close();
        await cache.stop();
        log.info(stats.snapshot(), 'stopped');
      })();
      return stopping;
    },
  };
}

function parseAddress(value: string, flag: string): { host: string; port: number } {
  try {
    return parseListenAddress(value);
  } catch (err) {
    throw new StartupError(`${flag} ${value}: ${errorMessage(err)}`);
  }
}

/** Fail fast, in one line, when the API server is unreachable or refuses our credentials. */
export async function probeApi(api: ApiConnection, context: string, server: string): Promise<void> {
  try {
    await api.getJson('/api', 10_000);
  } catch (err) {
    if (err instanceof ApiStatusError) {
      if (err.statusCode === 401) throw new StartupError(`the API server ${server} rejected the credentials of context "${context}" (401 Unauthorized)`);
      if (err.statusCode === 403) return; // authenticated, merely not allowed to read discovery
      throw new StartupError(`the API server ${server} answered ${err.statusCode}: ${err.message}`);
    }
    throw new StartupError(`cannot reach the API server ${server} (context "${context}"): ${errorMessage(err)}`, { cause: err });
  }
}

async function syncCache(cache: ClusterCache, server: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StartupError(`the cluster cache did not sync from ${server} within ${STARTUP_SYNC_TIMEOUT_MS / 1000} s`)), STARTUP_SYNC_TIMEOUT_MS);
  });
  try {
    await Promise.race([cache.start(), timeout]);
  } catch (err) {
    if (err instanceof StartupError) throw err;
    if (err instanceof ApiStatusError && err.statusCode === 403) throw new StartupError(`not allowed to watch Services, EndpointSlices and Pods in namespace "${cache.defaultNamespace}": ${err.message}`);
    throw new StartupError(`cannot list cluster objects from ${server}: ${errorMessage(err)}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}
