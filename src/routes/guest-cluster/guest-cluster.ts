// What a cluster route and a konnectivity route share: one kube context's API connection and
// watch cache, with the life around them (lifecycle.ts: start, wait, retry with backoff), the
// health checks once ready (health.ts) and the resync after a pause (resync.ts). Each route kind
// composes one with its own dialer (a port-forward transport, a konnectivity dialer); names and
// IPs resolve through this cache either way, and the matcher asks it which IPs and namespaces the
// cluster has (GuestClusterView).
import type { Logger } from '../../core/log.js';
import { StartupError, errorMessage } from '../../core/errors.js';
import { loadKubeConfig, type LoadedKubeConfig } from '../../cluster/kubeconfig.js';
import { ApiConnection, ApiStatusError, CredentialError } from '../../cluster/api.js';
import type { EgressOptions } from '../../cluster/egress-proxy.js';
import { IMPERSONATION_FIX, refusesImpersonation } from '../../cluster/impersonation.js';
import { ClusterCache } from '../../cluster/cache.js';
import type { CacheStatus } from '../../cluster/cache-status.js';
import { SyncHeadway } from '../../cluster/sync-progress.js';
import { honouringRetryAfter } from '../../cluster/retry-after.js';
import { monotonicMs } from '../../core/clock.js';
import { shellQuote } from '../../core/escape.js';
import { lastRoundTrip } from '../../cluster/round-trip.js';
import { untrustedServer } from '../../cluster/tls-material.js';
import type { GuestClusterView, RouteState } from '../route.js';
import { RouteLifecycle, type RetryTiming, type Step } from './lifecycle.js';
import { RouteHealth, type Degraded } from './health.js';
import { CacheResync } from './resync.js';

/** A first sync fails once it has got no further for this long (cluster/sync-progress.ts SyncHeadway); a big one may take longer. */
export const SYNC_STALL_MS = 30_000;
/** How long the check at start that the default namespace exists may take (it only adds a warning). */
const NAMESPACE_CHECK_MS = 5_000;
/** How often a sync's headway is looked at. */
const HEADWAY_CHECK_MS = 1_000;

export interface GuestClusterSettings {
  /** --kubeconfig (or the managed daemon's transient kubeconfig for this route). */
  kubeconfig?: string;
  /** Namespace for short names (-n); only the default route takes it. */
  namespace?: string;
  /** How the API connection leaves: an extra trusted CA, a route that carries it (`via`). */
  egress?: EgressOptions;
  /** `connect` has just probed this API server with these credentials: the first start skips it. */
  apiChecked?: boolean;
  /** Test hook only (lifecycle.ts RetryTiming): the first retry's delay. */
  retry?: RetryTiming;
}

/** What the route kind adds to each attempt to become ready, and to the clean-up after a failed one. */
export interface GuestClusterHooks {
  /** Before the API server is probed (a konnectivity route makes its dialer); throws to fail the attempt. */
  beforeProbe?(step: Step): Promise<void>;
  /** Once the cache starts to sync (a cluster route starts its ingress watches). */
  syncing?(): void;
  /** After a failed attempt, before the cache stops (a konnectivity route drops its dialer). */
  reset?(): void;
}

export class GuestCluster implements GuestClusterView {
  readonly kube: LoadedKubeConfig;
  readonly api: ApiConnection;
  readonly cache: ClusterCache;
  private readonly life: RouteLifecycle;
  private readonly health: RouteHealth;
  private readonly resync: CacheResync;
  private skipProbe: boolean;
  private readonly name: string;

  /** Loads the context (a StartupError when the kubeconfig or context is unusable: a config error). */
  constructor(
    kind: string,
    spec: { name: string; context: string },
    settings: GuestClusterSettings,
    private readonly log: Logger,
    private readonly hooks: GuestClusterHooks = {},
    /** How its errors name the route, from its kubeconfig (`${kind} route ${name}` when not given). */
    label?: (kube: LoadedKubeConfig) => string,
  ) {
    this.name = spec.name;
    this.kube = loadKubeConfig({ kubeconfig: settings.kubeconfig, context: spec.context, namespace: settings.namespace });
    this.api = new ApiConnection(this.kube.kc, settings.egress);
    this.cache = new ClusterCache(this.api, log, this.kube.namespace);
    this.health = new RouteHealth(kind, this.api, this.kube.server, this.cache, log);
    this.resync = new CacheResync(this.cache);
    const reset = async () => {
      this.health.stop();
      this.hooks.reset?.();
      await this.cache.stop();
    };
    this.life = new RouteLifecycle(kind, spec.name, log, { connect: (step) => this.connect(step), reset }, settings.retry, label?.(this.kube));
    this.skipProbe = settings.apiChecked ?? false;
  }

  get defaultNamespace(): string {
    return this.kube.namespace;
  }

  get context(): string {
    return this.kube.context;
  }

  get server(): string {
    return this.kube.server;
  }

  get state(): RouteState {
    return this.life.state;
  }

  knowsIp(ip: string): boolean {
    return this.life.state === 'ready' && this.cache.knowsIp(ip);
  }

  /** The API server refuses the credentials (401) and has taken none since. */
  credentialsRefused(): boolean {
    return this.api.credentialProblem?.refused === true;
  }

  apiUnreachable(): boolean {
    // In error: it never started (its server away, or refusing) and retries from the kubeconfig it had.
    return this.life.state === 'error' || this.health.current?.unreachable === true;
  }

  /** The cluster's namespaces, when it lets us list them (for the PAC's "svc.ns" names). */
  knownNamespaces(): string[] | undefined {
    return this.life.state === 'ready' ? this.cache.knownNamespaces() : undefined;
  }

  namespaceExists(namespace: string): boolean | undefined {
    return this.life.state === 'ready' ? this.cache.namespaceExists(namespace) : undefined;
  }

  /**
   * Whether the namespace exists, from the cache when it lists namespaces, else by a GET of it:
   * 404 says absent even to a user who may not read namespaces (403: cannot tell, undefined).
   */
  async namespaceFound(namespace: string): Promise<boolean | undefined> {
    const known = this.namespaceExists(namespace);
    if (known !== undefined || this.life.state !== 'ready') return known;
    return this.api.getJson(`/api/v1/namespaces/${encodeURIComponent(namespace)}`, NAMESPACE_CHECK_MS).then(
      () => true,
      (err: unknown) => (err instanceof ApiStatusError && err.statusCode === 404 ? false : undefined),
    );
  }

  namesPodHostname(namespace: string, service: string, hostname: string): boolean {
    return this.life.state === 'ready' && this.cache.lookup.podByHostname(namespace, service, hostname) !== undefined;
  }

  /** While it first starts or syncs (knowsIp answers only after): see RouteLifecycle.whenSettled. */
  whenSettled(signal: AbortSignal): Promise<void> | undefined {
    return this.life.whenSettled(signal);
  }

  async learnIp(ip: string): Promise<string | undefined> {
    // No answer from the API server at all: its look-up would only hold the decision up.
    if (this.life.state !== 'ready') return `route ${this.name} is not ready (${this.life.state}), so it was not asked whether ${ip} is a Pod IP`;
    const degraded = this.health.current;
    if (degraded?.unreachable) return `route ${this.name} was not asked whether ${ip} is a Pod IP: ${degraded.reason}`;
    // A bounded, cached look-up (cluster/pod-lookup.ts); a refusal of the budget is no answer.
    return this.cache.findPodByIp(ip).then(
      (pod) => (pod ? undefined : this.partialView(ip)),
      (err: unknown) => `route ${this.name} could not look up ${ip} as a Pod IP: ${errorMessage(err)}`,
    );
  }

  /** Without cluster-wide rights an IP of an unwatched namespace is unknown here, not absent. */
  private partialView(ip: string): string | undefined {
    const status = this.cache.status();
    if (status.scope !== 'namespaces') return undefined;
    return `route ${this.name} sees namespaces ${status.namespaces.join(', ')} only (not allowed to watch cluster-wide), so ${ip} may be another namespace's: reach it by its Service name (svc.namespace)`;
  }

  /** Probe the API server and sync the cache; on failure the route is in error and retries later. */
  start(): Promise<void> {
    return this.life.start();
  }

  /** One attempt (lifecycle.ts): `step` throws once the route is closed, so nothing restarts after close(). */
  private async connect(step: Step): Promise<void> {
    if (this.hooks.beforeProbe) await this.hooks.beforeProbe(step);
    if (this.skipProbe) this.skipProbe = false;
    else await probeApi(this.api, this.kube.context, this.kube.server, this.log);
    step('syncing');
    this.hooks.syncing?.();
    await syncCache(this.cache, this.kube.server, { context: this.kube.context });
    this.health.start();
  }

  /** Waits while the route starts or syncs, or resyncs after a pause, bounded by `signal`; fails at once while it is in error. */
  async whenReady(signal: AbortSignal): Promise<void> {
    await this.life.whenReady(signal);
    await this.resync.wait(signal);
  }

  /** Degraded now, and why (undefined: healthy), checked again if the last check said so (health.ts). */
  degradedNow(): Degraded | undefined {
    return this.life.state === 'ready' ? this.health.currentRechecked() : this.health.current;
  }

  /**
   * The process did not run for a while (core/pause-detector.ts): every watch watches again;
   * streams asked for meanwhile wait (bounded) until the watches are back, so they go to pods that
   * still exist. `also` runs before the health check (the route's own checks after a pause).
   */
  afterPause(also?: () => void): void {
    if (this.life.state !== 'ready') return;
    this.resync.start();
    also?.();
    this.health.check();
  }

  /**
   * The route's state as the cluster sees it: its lifecycle's, or degraded once ready (health.ts).
   * `unreachable`: no request reaches the API server (a route that needs it for each stream is down).
   */
  status(): { state: RouteState; reason?: string; since: string; unreachable?: true } {
    const degraded = this.life.state === 'ready' ? this.health.check() : undefined;
    return {
      state: degraded ? 'degraded' : this.life.state,
      ...(degraded ? { reason: degraded.reason } : this.life.reason ? { reason: this.life.reason } : {}),
      // Ready since it last served again, when it was degraded since it started: not hiding an outage.
      since: new Date(degraded?.since ?? Math.max(this.life.since, this.life.state === 'ready' ? (this.health.recoveredAt ?? 0) : 0)).toISOString(),
      ...(degraded?.unreachable ? { unreachable: true as const } : {}),
    };
  }

  cacheStatus() {
    return this.cache.status();
  }

  /** The last round trip to the API server, measured on the watches and probes it makes anyway (cluster/round-trip.ts). */
  apiRoundTrip(): { ms: number; at: string } | undefined {
    const last = lastRoundTrip(this.api);
    return last && { ms: last.ms, at: new Date(last.at).toISOString() };
  }

  /** No further attempts, no more health checks: what may still use the cache keeps it until stop(). */
  close(): void {
    this.life.close();
    this.health.stop();
  }

  async stop(): Promise<void> {
    await this.cache.stop();
  }
}

/** How long the start-up probe waits out Retry-After answers in all. */
const PROBE_RETRY_AFTER_MS = 60_000;

/** Fail fast, in one line, when the API server is unreachable or refuses our credentials. */
export async function probeApi(api: ApiConnection, context: string, server: string, log?: Logger): Promise<void> {
  try {
    // Asked to wait (429 from API priority and fairness, a server still starting): waited, as
    // kubectl does, within a bound; a proxy that gave up at once would not start while kubectl works.
    await honouringRetryAfter(
      AbortSignal.timeout(PROBE_RETRY_AFTER_MS),
      () => api.getJson('/api', 10_000),
      (err, seconds) => log?.info({ status: err.statusCode, waitSeconds: seconds }, 'the API server asks to wait (Retry-After); waiting before starting'),
    );
  } catch (err) {
    if (err instanceof CredentialError) throw new StartupError(err.message, { cause: err });
    if (err instanceof ApiStatusError) {
      if (err.statusCode === 401) throw new StartupError(unauthorized(api, context, server));
      if (err.statusCode === 403) return; // authenticated, merely not allowed to read discovery
      throw new StartupError(`the API server ${server} answered ${err.statusCode}: ${err.message}`);
    }
    const untrusted = untrustedServer(err, api.trust);
    if (untrusted) throw new StartupError(`the API server ${server} (context "${context}") is not trusted: ${untrusted}`, { cause: err });
    throw new StartupError(`cannot reach the API server ${server} (context "${context}"): ${errorMessage(err)}`, { cause: err });
  }
}

/** A 401 at start: whose credentials, and what kubectl would need too (they fail there alike). */
function unauthorized(api: ApiConnection, context: string, server: string): string {
  const user = api.userName;
  const whose = user === undefined ? '' : ` (user "${user}")`;
  return `the API server ${server} rejected the credentials of context "${context}"${whose} (401 Unauthorized): ${api.refusalAdvice()} (kubectl with this context is refused alike)`;
}

/**
 * Syncs the cache; fails once the sync has got nowhere for `stallMs`. A fixed deadline would fail
 * a big cluster behind a slow link for ever: each retry lists from the start and meets it again.
 */
export async function syncCache(cache: ClusterCache, server: string, o: { stallMs?: number; context?: string } = {}): Promise<void> {
  const stallMs = o.stallMs ?? SYNC_STALL_MS;
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<never>((_, reject) => {
    const headway = new SyncHeadway();
    let lastMoved = monotonicMs();
    timer = setInterval(
      () => {
        const status = cache.status();
        if (headway.moved(status)) lastMoved = monotonicMs();
        else if (monotonicMs() - lastMoved >= stallMs)
          reject(new StartupError(`the cluster cache got no further syncing from ${server} for ${stallMs / 1000} s${stuckOn(status)}`));
      },
      Math.min(HEADWAY_CHECK_MS, stallMs / 4),
    );
  });
  stalled.catch(() => undefined);
  try {
    await Promise.race([cache.start(), stalled]);
  } catch (err) {
    if (err instanceof StartupError) throw err;
    if (err instanceof ApiStatusError && err.statusCode === 403) throw new StartupError(notAllowedToWatch(cache.defaultNamespace, err.message, o.context));
    throw new StartupError(`cannot list cluster objects from ${server}: ${errorMessage(err)}`, { cause: err });
  } finally {
    clearInterval(timer);
  }
}

/**
 * Neither cluster-wide nor in the route's namespace may the user watch what the cache needs: the
 * one line says whose rights, where, and the two ways out (another namespace, or the rights).
 */
function notAllowedToWatch(namespace: string, reason: string, context: string | undefined): string {
  const who = context === undefined ? '' : `context "${context}" `;
  // Pasted into a shell: single quotes, in which a `$(…)` in the name stays text.
  // With the namespace refused: doctor checks the context's own otherwise, and may find it fine.
  const doctor = `kubectl proxyout doctor${context === undefined ? '' : ` --context ${shellQuote(context)}`} -n ${shellQuote(namespace)}`;
  // The kubeconfig user's `as:` is what is refused, not list/watch: another namespace would not help.
  if (refusesImpersonation(reason)) return `${who}may not impersonate whom its kubeconfig user names: ${reason}; ${IMPERSONATION_FIX}`;
  return (
    `${who}may not watch Services and EndpointSlices cluster-wide nor in namespace "${namespace}": ${reason}; ` +
    `use a namespace it may read (the context's namespace, or -n) or ask for list/watch on services and endpointslices there (\`${doctor}\` lists what is missing)`
  );
}

/** " (services: 1200 of 5000 listed; endpointslices: 0 listed)": where a stalled sync stands. */
function stuckOn(status: CacheStatus): string {
  const kinds = Object.entries(status.syncing ?? {}).map(([label, p]) => `${label}: ${p.listed}${p.total !== undefined ? ` of ${p.total}` : ''} listed`);
  return kinds.length ? ` (${kinds.join('; ')})` : '';
}
