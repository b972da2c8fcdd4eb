// The streams of a konnectivity route: a claim's addresses come from `resolve` (resolve.ts, over
// the guest cluster's watch cache), and each is dialled through an apiserver-network-proxy server
// (konnectivity/dialer.ts) instead of a pod port-forward, moving on past a retryable failure. This
// holds the dialer's life (made at start, dropped after a failed attempt, closed once the streams
// it carries have ended); route.ts composes it with the guest cluster.
import type { OpenRequest, OpenedStream } from '../../core/types.js';
import type { Logger } from '../../core/log.js';
import { ConnectTimeoutError, HostUnreachableError, OverloadedError, ProxyError, UpstreamApiError, errorMessage } from '../../core/errors.js';
import { createKonnectivityDialer, type KonnectivityDialer } from '../../konnectivity/dialer.js';
import type { KonnectivitySpec } from '../../konnectivity/options.js';
import { formatHostPort } from '../../core/address.js';
import type { RouteState, RouteStatus } from '../route.js';
import type { RouteClaim } from '../route.js';

/** An address in the guest cluster's network: a ClusterIP, a Pod IP. */
export interface KonnectivityTarget {
  ip: string;
  port: number;
}

/**
 * The addresses a claim denotes, in the order to try them: a Service name → its ClusterIP (the
 * guest's kube-proxy balances) or its ready endpoints' Pod IPs; a headless pod name → its Pod IP;
 * an IP the cluster knows → itself. Rejects with a ProxyError (no such Service → 0x04…).
 */
export type KonnectivityResolve = (claim: RouteClaim, port: number, signal: AbortSignal) => Promise<KonnectivityTarget[]>;

export interface KonnectivityStreamsDeps {
  resolve: KonnectivityResolve;
  log: Logger;
  /** Makes the dialer at start(); createKonnectivityDialer by default (tests pass a fake). */
  makeDialer?: (spec: KonnectivitySpec) => Promise<KonnectivityDialer>;
  /** An address to dial while the server is failing, to see it serve again (the guest's kubernetes Service). */
  probeTarget?: () => KonnectivityTarget | undefined;
  /** How often that dial is made (10 s by default). */
  probeIntervalMs?: number;
}

const PROBE_INTERVAL_MS = 10_000;

export class KonnectivityStreams {
  readonly kind = 'konnectivity';
  private dialer?: KonnectivityDialer;
  private state: RouteState = 'starting';
  private reason?: string;
  private closing = false;
  private readonly streams = new Set<OpenedStream['stream']>();
  /**
   * The server itself failed the last dial (unreachable, TLS refused, no agent connected), and
   * none has succeeded since: the route is degraded, whatever its guest's API says.
   */
  private serverFailure?: { reason: string; since: number };
  private probeTimer?: NodeJS.Timeout;
  private probing = false;

  constructor(
    readonly name: string,
    private readonly spec: KonnectivitySpec,
    private readonly deps: KonnectivityStreamsDeps,
  ) {}

  /** Makes the dialer (a dialer of an earlier start goes); a route closed meanwhile keeps none. */
  async start(): Promise<void> {
    try {
      const dialer = await (this.deps.makeDialer ?? createKonnectivityDialer)(this.spec);
      if (this.closing) {
        dialer.close();
        throw new OverloadedError(`route ${this.name} is closing`);
      }
      this.dialer?.close();
      this.dialer = dialer;
      this.state = 'ready';
      this.reason = undefined;
      this.serverFailure = undefined;
    } catch (err) {
      this.state = 'error';
      this.reason = errorMessage(err);
      throw err;
    }
  }

  async open(request: OpenRequest, claim: RouteClaim, signal: AbortSignal): Promise<OpenedStream> {
    if (this.closing) throw new OverloadedError(`route ${this.name} is closing`);
    const dialer = this.dialer;
    if (!dialer) throw new HostUnreachableError(`route ${this.name} is not ready: ${this.reason ?? 'starting'}`);
    const port = request.destination.port;
    const targets = await this.deps.resolve(claim, port, signal);
    if (targets.length === 0) throw new HostUnreachableError(`${formatHostPort(claim.host, port)} has no address in the cluster of route ${this.name}`);
    let lastError: unknown;
    for (let i = 0; i < targets.length; i++) {
      const t = targets[i]!;
      try {
        const stream = await dialer.dial(t.ip, t.port, signal);
        this.serverServes();
        this.streams.add(stream);
        stream.once('close', () => this.streams.delete(stream));
        return { stream, via: `konnectivity ${this.spec.server} → ${formatHostPort(t.ip, t.port)}` };
      } catch (err) {
        lastError = err;
        if (err instanceof UpstreamApiError && !signal.aborted) this.serverFailed(err);
        const retry = err instanceof ProxyError && err.retryable && !signal.aborted && i + 1 < targets.length;
        this.deps.log.debug({ target: formatHostPort(t.ip, t.port), error: errorMessage(err), retry }, 'konnectivity dial failed');
        if (!retry) break;
      }
    }
    throw lastError;
  }

  /** Why the server failed the last dial, and since when; undefined once a dial succeeds. */
  failure(): { reason: string; since: string } | undefined {
    const f = this.serverFailure;
    return f && { reason: f.reason, since: new Date(f.since).toISOString() };
  }

  private serverFailed(err: UpstreamApiError): void {
    if (!this.serverFailure) this.deps.log.warn({ server: this.spec.server, err: err.message }, 'konnectivity server failing: route degraded');
    this.serverFailure = { reason: err.message, since: this.serverFailure?.since ?? Date.now() };
    // Nothing else would tell once the server serves again while no client dials.
    this.probeTimer ??= setInterval(() => void this.probe(), this.deps.probeIntervalMs ?? PROBE_INTERVAL_MS).unref();
  }

  private serverServes(): void {
    this.stopProbing();
    if (!this.serverFailure) return;
    this.deps.log.info({ server: this.spec.server, degradedForMs: Date.now() - this.serverFailure.since }, 'konnectivity server serving again');
    this.serverFailure = undefined;
  }

  /** One dial to the probe target: an answer from the far side (even a refusal) means the server and an agent serve. */
  private async probe(): Promise<void> {
    const dialer = this.dialer;
    const target = this.deps.probeTarget?.();
    if (!dialer || !target || this.probing) return;
    this.probing = true;
    try {
      (await dialer.dial(target.ip, target.port, AbortSignal.timeout(PROBE_INTERVAL_MS))).destroy();
      this.serverServes();
    } catch (err) {
      if (err instanceof UpstreamApiError) this.serverFailed(err);
      else if (!(err instanceof ConnectTimeoutError) && dialer === this.dialer) this.serverServes();
    } finally {
      this.probing = false;
    }
  }

  private stopProbing(): void {
    clearInterval(this.probeTimer);
    this.probeTimer = undefined;
  }

  status(): RouteStatus {
    const details: Record<string, unknown> = { server: this.spec.server, mode: this.spec.mode, ...(this.dialer?.stats() ?? {}) };
    return { name: this.name, kind: this.kind, state: this.state, ...(this.reason ? { reason: this.reason } : {}), details };
  }

  /** After a pause: new dials go to a new connection to the server (konnectivity/grpc-dialer.ts). */
  afterPause(): void {
    this.dialer?.afterPause?.();
  }

  /** Drops the dialer of a start that did not lead to serving (the owner tries again with start()). */
  stop(): void {
    this.stopProbing();
    this.dialer?.close();
    this.dialer = undefined;
    this.state = 'starting';
    this.reason = undefined;
  }

  /** Stops new streams; the open ones keep going until they end, then the gRPC channel closes. */
  async close(): Promise<void> {
    this.closing = true;
    this.stopProbing();
    await Promise.all([...this.streams].map((s) => new Promise<void>((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve())))));
    this.dialer?.close();
  }
}
