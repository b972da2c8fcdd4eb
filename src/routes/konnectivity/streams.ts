// The streams of a konnectivity route: a claim's addresses come from `resolve` (resolve.ts, over
// the guest cluster's watch cache), and each is dialled through an apiserver-network-proxy server
// (konnectivity/dialer.ts) instead of a pod port-forward, moving on past a retryable failure. This
// holds the dialer's life (made at start, dropped after a failed attempt, closed once the streams
// it carries have ended); route.ts composes it with the guest cluster.
import type { OpenRequest, OpenedStream } from '../../core/types.js';
import type { Logger } from '../../core/log.js';
import { HostUnreachableError, OverloadedError, ProxyError, errorMessage } from '../../core/errors.js';
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
}

export class KonnectivityStreams {
  readonly kind = 'konnectivity';
  private dialer?: KonnectivityDialer;
  private state: RouteState = 'starting';
  private reason?: string;
  private closing = false;
  private readonly streams = new Set<OpenedStream['stream']>();

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
        this.streams.add(stream);
        stream.once('close', () => this.streams.delete(stream));
        return { stream, via: `konnectivity ${this.spec.server} → ${formatHostPort(t.ip, t.port)}` };
      } catch (err) {
        lastError = err;
        const retry = err instanceof ProxyError && err.retryable && !signal.aborted && i + 1 < targets.length;
        this.deps.log.debug({ target: formatHostPort(t.ip, t.port), error: errorMessage(err), retry }, 'konnectivity dial failed');
        if (!retry) break;
      }
    }
    throw lastError;
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
    this.dialer?.close();
    this.dialer = undefined;
    this.state = 'starting';
    this.reason = undefined;
  }

  /** Stops new streams; the open ones keep going until they end, then the gRPC channel closes. */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.all([...this.streams].map((s) => new Promise<void>((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve())))));
    this.dialer?.close();
  }
}
