// A cluster route: one kube context of the routing table, reached by pod port-forward. It is a
// guest cluster (../guest-cluster/: API connection, watch cache, start and retry, health) with a
// port-forward transport and the pod streams over it (pod-streams.ts), and is ready or not on its
// own — a cluster whose API server is down or still syncing fails or holds up only its own
// destinations (SOCKS 0x04 / HTTP 502 naming the route and the reason), never another route's.
import type { Logger } from '../../core/log.js';
import type { OpenRequest, OpenedStream } from '../../core/types.js';
import {
  ConnectionRefusedError,
  HostUnreachableError,
  NotAllowedError,
  ProxyError,
  RouteUnavailableError,
  UnsupportedTargetError,
  errorMessage,
} from '../../core/errors.js';
import { ApiReachability } from '../../cluster/api-reachability.js';
import { IngressHostWatcher } from '../../cluster/ingress-hosts.js';
import { WebSocketV4Transport } from '../../tunnel/websocket-v4.js';
import { SpdyTransport } from '../../tunnel/spdy-transport.js';
import { NegotiatingTransport, type TransportMode } from '../../tunnel/negotiate.js';
import type { KeepaliveOptions } from '../../tunnel/keepalive.js';
import type { Route, RouteStatus } from '../route.js';
import type { RouteClaim } from '../route.js';
import type { ClusterRouteSpec } from '../../routes/spec.js';
import { GuestCluster, type GuestClusterSettings } from '../guest-cluster/guest-cluster.js';
import { Resolver } from './resolver.js';
import { PodStreams } from './pod-streams.js';
import { detectIngressController, ingressDestination, ingressTarget, isIngressClaim, serviceLookup } from './ingress-controller.js';

/** Wait this long for a dial error on ports a pod does not declare (see PodStreams). */
const CONFIRM_UNDECLARED_PORT_MS = 150;
/** After a pause, a tunnel that carries streams must answer a PING within this. */
const TUNNEL_CHECK_AFTER_PAUSE_MS = 3_000;

export interface ClusterRouteSettings extends GuestClusterSettings {
  clusterDomain: string;
  transport: TransportMode;
  keepalive: KeepaliveOptions;
  connectTimeoutMs: number;
  allowHostNetworkPods: boolean;
}

export class ClusterRoute implements Route {
  readonly kind = 'cluster';
  readonly name: string;
  readonly guest: GuestCluster;
  private readonly transport: NegotiatingTransport;
  private readonly streams: PodStreams;
  private readonly resolver: Resolver;
  private readonly clusterDomain: string;
  private readonly ingress: IngressHostWatcher;
  private ingressStarted = false;
  /** Hears the Ingress and OpenShift Route hosts as they change (proxy/ingress-feed.ts feeds them to the matchers). */
  private onIngressHosts?: (hosts: string[]) => void;
  readonly label: string;
  /** The kubeconfig file it was loaded from, when one was named (a daemon's: its transient one). */
  private readonly kubeconfigFile?: string;
  private openStreams = 0;
  private drained?: () => void;
  /** close() was called: the route only finishes its streams (a reload replaced it, or the proxy stops). */
  private closing = false;

  /** Loads the context (a StartupError when the kubeconfig or context is unusable: a config error). */
  constructor(
    readonly spec: ClusterRouteSpec,
    settings: ClusterRouteSettings,
    log: Logger,
  ) {
    this.name = spec.name;
    this.kubeconfigFile = settings.kubeconfig;
    const describe = (kube: { context: string }) => `cluster route ${spec.name}${kube.context !== spec.name ? ` (context ${kube.context})` : ''}`;
    const guest = new GuestCluster(
      'cluster',
      spec,
      settings,
      log,
      {
        // Ingress hosts arrive when they do; the route does not wait for them. Started once: its
        // watches retry on their own.
        syncing: () => {
          if (this.ingressStarted) return;
          this.ingressStarted = true;
          void this.ingress.start();
        },
      },
      describe,
    );
    this.guest = guest;
    const kube = guest.kube;
    this.label = describe(kube);
    // A tunnel that stopped answering: is the path to the API server dead? (api-reachability.ts)
    const onDeadTunnel = () => ApiReachability.of(guest.api).suspect();
    const websocket = new WebSocketV4Transport(guest.api, log, settings.keepalive, onDeadTunnel);
    const spdy = new SpdyTransport(guest.api, log, { keepalive: settings.keepalive, connectTimeoutMs: settings.connectTimeoutMs, onDeadTunnel });
    this.transport = new NegotiatingTransport(settings.transport, spdy, websocket, log, kube.context);
    // Tunnels belong to pod instances: one the cache sees go is closed, not left to fail streams.
    guest.cache.lookup.onPodGone = (namespace, pod, uid) => this.transport.podGone({ namespace, pod, uid });
    this.resolver = new Resolver(guest.cache, settings.clusterDomain, undefined, { allowHostNetworkPods: settings.allowHostNetworkPods });
    this.clusterDomain = settings.clusterDomain;
    this.streams = new PodStreams(spec.name, this.resolver, this.transport, log, {
      confirmMs: CONFIRM_UNDECLARED_PORT_MS,
      reopenTimeoutMs: settings.connectTimeoutMs,
    });
    this.ingress = new IngressHostWatcher(guest.api, log, (hosts) => this.onIngressHosts?.(hosts));
  }

  learnIp(ip: string): Promise<string | undefined> {
    return this.guest.learnIp(ip);
  }

  whenSettled(signal: AbortSignal): Promise<void> | undefined {
    return this.guest.whenSettled(signal);
  }

  /** Probe the API server and sync the cache; on failure the route is in error and retries later. */
  start(): Promise<void> {
    return this.guest.start();
  }

  async open(request: OpenRequest, claim: RouteClaim, signal: AbortSignal): Promise<OpenedStream> {
    await this.guest.whenReady(signal);
    // No answer from the API server at all: a tunnel cannot open; say so now, not after the connect timeout.
    const degraded = this.guest.degradedNow();
    if (degraded?.unreachable) throw new RouteUnavailableError(`${degraded.reason} (since ${new Date(degraded.since).toISOString()})`);
    let opened: OpenedStream;
    try {
      opened = isIngressClaim(claim) ? await this.openIngress(request, claim, signal) : await this.streams.open(request, claim, signal);
    } catch (err) {
      // A dial that timed out or got no answer: is the path to the API server dead? (The health
      // check then shows it, and later streams fail at once instead of each waiting its timeout.)
      // Checked, not suspected: a server that answers the probe at once is there (a kubelet behind
      // it hung), and renewing every watch after each such stream loaded it for nothing.
      if (noAnswer(err)) ApiReachability.of(this.guest.api).check();
      throw err;
    }
    // The API server relayed the kubelet's answer: it is there (a probe sent while it was away says otherwise).
    ApiReachability.of(this.guest.api).sawAnswer();
    this.openStreams++;
    opened.stream.on('close', this.streamClosed);
    return opened;
  }

  async check(claim: RouteClaim, port: number): Promise<string | undefined> {
    if (isIngressClaim(claim) || this.guest.state !== 'ready') return undefined;
    try {
      await this.resolver.resolveParsed(claim.host, port, claim);
      return undefined;
    } catch (err) {
      // What the name or port is, not what its pods are doing now (none ready during a rollout).
      const absent =
        err instanceof NotAllowedError || err instanceof HostUnreachableError || err instanceof ConnectionRefusedError || err instanceof UnsupportedTargetError;
      return absent ? `${this.label}: ${errorMessage(err)}` : undefined;
    }
  }

  /** After a pause the cache watches again (GuestCluster.afterPause), and every tunnel is checked before it carries a new stream. */
  afterPause(): void {
    // Closing, it carries only its last streams: their tunnels are checked, its cache is not renewed.
    if (this.closing) return this.transport.afterPause(TUNNEL_CHECK_AFTER_PAUSE_MS);
    this.guest.afterPause(() => {
      this.ingress.afterPause();
      this.transport.afterPause(TUNNEL_CHECK_AFTER_PAUSE_MS);
    });
  }

  /** One listener shared by every stream ('close' comes once per stream). */
  private readonly streamClosed = (): void => {
    if (--this.openStreams === 0) this.drained?.();
  };

  /** An ingress host: the cluster's ingress controller Service, same port, bytes untouched (TLS/SNI pass). */
  private async openIngress(request: OpenRequest, claim: RouteClaim, signal: AbortSignal): Promise<OpenedStream> {
    const detected = detectIngressController(
      this.spec.ingress,
      serviceLookup((ns, name) => this.guest.cache.lookup.service(ns, name)),
      // The learnt host (a wildcard's pattern) or, for a configured domain, the very name asked.
      this.ingress.classesOf(claim.reason === 'ingress-host' ? (claim.pattern ?? claim.host) : claim.host),
    );
    const target = ingressTarget(claim, request.destination.port, detected);
    const plan = await this.resolver.resolve(ingressDestination(target, this.clusterDomain), request.client);
    return this.streams.openPlan(plan, signal, request.frontEnd === 'http-forward');
  }

  watchIngressHosts(onChange: (hosts: string[]) => void): string[] {
    this.onIngressHosts = onChange;
    return this.ingress.hosts();
  }

  status(): RouteStatus {
    const kube = this.guest.kube;
    const { unreachable, ...state } = this.guest.status();
    const apiRoundTrip = this.guest.apiRoundTrip();
    return {
      name: this.name,
      kind: this.kind,
      ...state,
      // Each stream opens through the API server: one that does not answer fails them at once (open()).
      ...(unreachable ? { condition: 'down' as const } : {}),
      details: {
        context: kube.context,
        // What a kubectl line must name to ask this API server as the route does (doctor's fix lines).
        ...(this.kubeconfigFile ? { kubeconfig: this.kubeconfigFile } : {}),
        namespace: kube.namespace,
        server: kube.server,
        ...(apiRoundTrip ? { apiRoundTrip } : {}),
        transport: this.transport.name,
        openStreams: this.openStreams,
        cache: this.guest.cacheStatus(),
        ingress: this.ingress.status(),
        pods: this.transport.stats(),
      },
    };
  }

  transportStats() {
    return this.transport.stats();
  }

  /** After the streams it carries have ended (or at once with `now`), its tunnels and watches go. */
  async close(now = false): Promise<void> {
    this.closing = true;
    this.guest.close();
    this.ingress.stop();
    if (!now && this.openStreams > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    await this.transport.close();
    await this.guest.stop();
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
