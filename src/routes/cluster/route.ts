// A cluster route: one kube context of the routing table. It owns that cluster's API connection,
// watch cache, port-forward transports and resolver, and is ready or not on its own — a cluster
// whose API server is down or still syncing fails or holds up only its own destinations (SOCKS
// 0x04 / HTTP 502 naming the route and the reason), never another route's. A route that could
// not start tries again in the background, with backoff, until it can or it is closed
// (../guest-cluster/lifecycle.ts, shared with konnectivity routes).
import type { Logger } from '../../core/log.js';
import type { OpenRequest, OpenedStream } from '../../core/types.js';
import { StartupError, errorMessage } from '../../core/errors.js';
import { loadKubeConfig, type LoadedKubeConfig } from '../../cluster/kubeconfig.js';
import { ApiConnection, ApiStatusError, CredentialError } from '../../cluster/api.js';
import type { EgressOptions } from '../../cluster/egress-proxy.js';
import { ClusterCache } from '../../cluster/cache.js';
import { WebSocketV4Transport } from '../../tunnel/websocket-v4.js';
import { SpdyTransport } from '../../tunnel/spdy-transport.js';
import { NegotiatingTransport, type TransportMode } from '../../tunnel/negotiate.js';
import type { KeepaliveOptions } from '../../tunnel/keepalive.js';
import { Resolver } from './resolver.js';
import { ClusterRoute } from './pod-streams.js';
import type { Route, RouteStatus } from '../../routing/route.js';
import type { ClusterView, Claim } from '../../routing/table.js';
import type { ClusterRouteSpec } from '../../routing/table-spec.js';
import { IngressHostWatcher } from '../../cluster/ingress-hosts.js';
import { detectIngressController, ingressDestination, ingressTarget, isIngressClaim, serviceLookup } from './ingress-controller.js';
import { RouteLifecycle, type RetryTiming, type Step } from '../guest-cluster/lifecycle.js';
import { RouteHealth } from '../guest-cluster/health.js';
import { ProxyError, RouteUnavailableError } from '../../core/errors.js';
import { ApiReachability } from '../../cluster/api-reachability.js';
import { CacheResync } from '../guest-cluster/resync.js';

/** Wait this long for a dial error on ports a pod does not declare (see ClusterRoute). */
const CONFIRM_UNDECLARED_PORT_MS = 150;
export const SYNC_TIMEOUT_MS = 30_000;
/** After a pause, a tunnel that carries streams must answer a PING within this. */
const TUNNEL_CHECK_AFTER_PAUSE_MS = 3_000;

export interface ClusterRouteSettings {
  /** --kubeconfig (or the managed daemon's transient kubeconfig for this route). */
  kubeconfig?: string;
  /** Namespace for short names (-n); only the default route takes it. */
  namespace?: string;
  clusterDomain: string;
  transport: TransportMode;
  keepalive: KeepaliveOptions;
  connectTimeoutMs: number;
  allowHostNetworkPods: boolean;
  /** How the API connection leaves: an extra trusted CA, a route that carries it (`via`). */
  egress?: EgressOptions;
  /** `connect` has just probed this API server with these credentials: the first start skips it. */
  apiChecked?: boolean;
  /** Test hook only (../guest-cluster/lifecycle.ts RetryTiming): the first retry's delay. */
  retry?: RetryTiming;
}

export class ClusterRouteRuntime implements Route, ClusterView {
  readonly kind = 'cluster';
  readonly name: string;
  readonly kube: LoadedKubeConfig;
  private readonly api: ApiConnection;
  private readonly cache: ClusterCache;
  private readonly transport: NegotiatingTransport;
  private readonly streams: ClusterRoute;
  private readonly resolver: Resolver;
  private readonly clusterDomain: string;
  private readonly ingress: IngressHostWatcher;
  private ingressStarted = false;
  private skipProbe: boolean;
  /** Ingress and OpenShift Route hosts as they change (proxy/ingress-feed.ts feeds them to the matchers). */
  onIngressHosts?: (hosts: string[]) => void;
  private readonly life: RouteLifecycle;
  private readonly health: RouteHealth;
  readonly label: string;
  private openStreams = 0;
  private drained?: () => void;
  private readonly resync: CacheResync;

  /** Loads the context (a StartupError when the kubeconfig or context is unusable: a config error). */
  constructor(
    readonly spec: ClusterRouteSpec,
    settings: ClusterRouteSettings,
    log: Logger,
  ) {
    this.name = spec.name;
    this.kube = loadKubeConfig({ kubeconfig: settings.kubeconfig, context: spec.context, namespace: settings.namespace });
    this.api = new ApiConnection(this.kube.kc, settings.egress);
    this.cache = new ClusterCache(this.api, log, this.kube.namespace);
    // A tunnel that stopped answering: is the path to the API server dead? (api-reachability.ts)
    const onDeadTunnel = () => ApiReachability.of(this.api).suspect();
    const websocket = new WebSocketV4Transport(this.api, log, settings.keepalive, onDeadTunnel);
    const spdy = new SpdyTransport(this.api, log, { keepalive: settings.keepalive, connectTimeoutMs: settings.connectTimeoutMs, onDeadTunnel });
    this.transport = new NegotiatingTransport(settings.transport, spdy, websocket, log, this.kube.context);
    // Tunnels belong to pod instances: one the cache sees go is closed, not left to fail streams.
    this.cache.lookup.onPodGone = (namespace, pod, uid) => this.transport.podGone({ namespace, pod, uid });
    this.resolver = new Resolver(this.cache, settings.clusterDomain, undefined, { allowHostNetworkPods: settings.allowHostNetworkPods });
    this.clusterDomain = settings.clusterDomain;
    this.streams = new ClusterRoute(spec.name, this.resolver, this.transport, log, {
      confirmMs: CONFIRM_UNDECLARED_PORT_MS,
      reopenTimeoutMs: settings.connectTimeoutMs,
    });
    this.ingress = new IngressHostWatcher(this.api, log, (hosts) => this.onIngressHosts?.(hosts));
    this.label = `cluster route ${spec.name}${this.kube.context !== spec.name ? ` (context ${this.kube.context})` : ''}`;
    this.health = new RouteHealth('cluster', this.api, this.kube.server, this.cache, log);
    this.resync = new CacheResync(this.cache);
    const reset = () => {
      this.health.stop();
      return this.cache.stop();
    };
    this.life = new RouteLifecycle('cluster', spec.name, log, { connect: (step) => this.connect(step), reset }, settings.retry, this.label);
    this.skipProbe = settings.apiChecked ?? false;
  }

  get defaultNamespace(): string {
    return this.kube.namespace;
  }

  get server(): string {
    return this.kube.server;
  }

  knowsIp(ip: string): boolean {
    return this.life.state === 'ready' && this.cache.knowsIp(ip);
  }

  /** The cluster's namespaces, when it lets us list them (for the PAC's "svc.ns" names). */
  knownNamespaces(): string[] | undefined {
    return this.life.state === 'ready' ? this.cache.knownNamespaces() : undefined;
  }

  async learnIp(ip: string): Promise<void> {
    if (this.life.state !== 'ready') return;
    // A bounded, cached look-up (cluster/pod-lookup.ts); a refusal of the budget is no answer.
    await this.cache.findPodByIp(ip).catch(() => undefined);
  }

  namespaceExists(namespace: string): boolean | undefined {
    return this.life.state === 'ready' ? this.cache.namespaceExists(namespace) : undefined;
  }

  /** Probe the API server and sync the cache; on failure the route is in error and retries later. */
  start(): Promise<void> {
    return this.life.start();
  }

  /** One attempt (../guest-cluster/lifecycle.ts): `step` throws once the route is closed, so nothing restarts after close(). */
  private async connect(step: Step): Promise<void> {
    if (this.skipProbe) this.skipProbe = false;
    else await probeApi(this.api, this.kube.context, this.kube.server);
    step('syncing');
    // Ingress hosts arrive when they do; the route does not wait for them. Started once: its
    // watches retry on their own.
    if (!this.ingressStarted) {
      this.ingressStarted = true;
      void this.ingress.start();
    }
    await syncCache(this.cache, this.kube.server);
    this.health.start();
  }

  async open(request: OpenRequest, claim: Claim, signal: AbortSignal): Promise<OpenedStream> {
    await this.life.whenReady(signal);
    await this.resync.wait(signal);
    // No answer from the API server at all: a tunnel cannot open; say so now, not after the connect timeout.
    const degraded = this.health.current;
    if (degraded?.unreachable) throw new RouteUnavailableError(`${degraded.reason} (since ${new Date(degraded.since).toISOString()})`);
    let opened: OpenedStream;
    try {
      opened = isIngressClaim(claim) ? await this.openIngress(request, claim, signal) : await this.streams.open(request, claim, signal);
    } catch (err) {
      // A dial that timed out or got no answer: is the path to the API server dead? (The health
      // check then shows it, and later streams fail at once instead of each waiting its timeout.)
      if (noAnswer(err)) ApiReachability.of(this.api).suspect();
      throw err;
    }
    this.openStreams++;
    opened.stream.on('close', this.streamClosed);
    return opened;
  }

  /**
   * The process did not run for a while (core/pause-detector.ts): every watch watches again and
   * every tunnel is checked before it carries a new stream. Streams asked for meanwhile wait
   * (bounded) until the watches are back, so they go to pods that still exist.
   */
  afterPause(): void {
    if (this.life.state !== 'ready') return;
    this.resync.start();
    this.ingress.afterPause();
    this.transport.afterPause(TUNNEL_CHECK_AFTER_PAUSE_MS);
    this.health.check();
  }

  /** One listener shared by every stream ('close' comes once per stream). */
  private readonly streamClosed = (): void => {
    if (--this.openStreams === 0) this.drained?.();
  };

  /** An ingress host: the cluster's ingress controller Service, same port, bytes untouched (TLS/SNI pass). */
  private async openIngress(request: OpenRequest, claim: Claim, signal: AbortSignal): Promise<OpenedStream> {
    const detected = detectIngressController(
      this.spec.ingress,
      serviceLookup((ns, name) => this.cache.lookup.service(ns, name)),
    );
    const target = ingressTarget(claim, request.destination.port, detected);
    return this.streams.openPlan(await this.resolver.resolve(ingressDestination(target, this.clusterDomain)), signal);
  }

  /** The ingress hosts known now (what a matcher starts from when it is fed). */
  ingressHosts(): string[] {
    return this.ingress.hosts();
  }

  status(): RouteStatus {
    const degraded = this.life.state === 'ready' ? this.health.check() : undefined;
    return {
      name: this.name,
      kind: this.kind,
      state: degraded ? 'degraded' : this.life.state,
      ...(degraded ? { reason: degraded.reason } : this.life.reason ? { reason: this.life.reason } : {}),
      since: new Date(degraded?.since ?? this.life.since).toISOString(),
      details: {
        context: this.kube.context,
        namespace: this.kube.namespace,
        server: this.kube.server,
        transport: this.transport.name,
        openStreams: this.openStreams,
        cache: this.cache.status(),
        ingress: this.ingress.status(),
        pods: this.transport.stats(),
      },
    };
  }

  cacheStatus() {
    return this.cache.status();
  }

  transportStats() {
    return this.transport.stats();
  }

  /** After the streams it carries have ended (or at once with `now`), its tunnels and watches go. */
  async close(now = false): Promise<void> {
    this.life.close();
    this.health.stop();
    this.ingress.stop();
    if (!now && this.openStreams > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    await this.transport.close();
    await this.cache.stop();
  }
}

/**
 * A stream that failed without an HTTP answer: timed out, or the connection refused, reset or
 * unreachable (a system error underneath). A refusal in HTTP (a 403, a kubelet's 500) is an
 * answer: it says nothing of the path, and must not make the route renew its watches.
 */
export function noAnswer(err: unknown): boolean {
  if (!(err instanceof ProxyError)) return false;
  if (err.reason === 'timeout') return true;
  return err.reason === 'api-error' && typeof (err.cause as NodeJS.ErrnoException | undefined)?.code === 'string';
}

/** Fail fast, in one line, when the API server is unreachable or refuses our credentials. */
export async function probeApi(api: ApiConnection, context: string, server: string): Promise<void> {
  try {
    await api.getJson('/api', 10_000);
  } catch (err) {
    if (err instanceof CredentialError) throw new StartupError(err.message, { cause: err });
    if (err instanceof ApiStatusError) {
      if (err.statusCode === 401) throw new StartupError(`the API server ${server} rejected the credentials of context "${context}" (401 Unauthorized)`);
      if (err.statusCode === 403) return; // authenticated, merely not allowed to read discovery
      throw new StartupError(`the API server ${server} answered ${err.statusCode}: ${err.message}`);
    }
    throw new StartupError(`cannot reach the API server ${server} (context "${context}"): ${errorMessage(err)}`, { cause: err });
  }
}

export async function syncCache(cache: ClusterCache, server: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StartupError(`the cluster cache did not sync from ${server} within ${SYNC_TIMEOUT_MS / 1000} s`)), SYNC_TIMEOUT_MS);
  });
  try {
    await Promise.race([cache.start(), timeout]);
  } catch (err) {
    if (err instanceof StartupError) throw err;
    if (err instanceof ApiStatusError && err.statusCode === 403)
      throw new StartupError(`not allowed to watch Services, EndpointSlices and Pods in namespace "${cache.defaultNamespace}": ${err.message}`);
    throw new StartupError(`cannot list cluster objects from ${server}: ${errorMessage(err)}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}
