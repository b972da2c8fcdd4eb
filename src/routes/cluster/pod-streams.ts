import type { Duplex } from 'node:stream';
import type { Logger } from '../../core/log.js';
import type { OpenRequest, OpenedStream } from '../../core/types.js';
import { ConnectTimeoutError, ProxyError, errorMessage } from '../../core/errors.js';
import type { PodPort, Transport } from '../../tunnel/transport.js';
import type { Plan, Resolver } from './resolver.js';
import type { RouteClaim } from '../route.js';
import { RetryBeforeFirstByte } from './retry-stream.js';

export interface PodStreamsOptions {
  /**
   * The v4 port-forward protocol never says "dialled": a refused port only shows as error text
   * shortly after the tunnel opens. For a pod port we have not seen accept recently we wait this
   * long for that text, so the client gets "connection refused" instead of success-then-close.
   */
  confirmMs: number;
  /** Moving a stream to another endpoint after it was called connected must finish in this time. */
  reopenTimeoutMs?: number;
  /** An endpoint whose stream has not opened in this time, with another left to try, is left for it. */
  slowOpenMs?: number;
}

/** A pod port that accepted within this time is trusted to accept again without the wait. */
const CONFIRMED_TTL_MS = 5 * 60_000;
const CONFIRMED_MAX = 10_000;
/** A pod port that refused is tried after the others for this long (it may be restarting). */
const REFUSED_TTL_MS = 10_000;
const DEFAULT_REOPEN_TIMEOUT_MS = 15_000;
/**
 * A tunnel opens in milliseconds to a kubelet that answers; one that hangs (or a node cut off, not
 * yet marked NotReady) would hold the connection for the whole connect timeout, then fail it,
 * while the Service's other endpoints serve.
 */
const SLOW_OPEN_MS = 3_000;

/**
 * Opens streams into one cluster's pods: resolve through the watch cache, then open a pod stream
 * with the transport, moving to another endpoint while that is still possible. (The cluster route
 * as the Router sees it — readiness, status, close — is route.ts, built around this.)
 */
export class PodStreams {
  private readonly confirmed = new Map<string, number>();
  private readonly refused = new Map<string, number>();

  constructor(
    readonly name: string,
    private readonly resolver: Resolver,
    private readonly transport: Transport,
    private readonly log: Logger,
    private readonly options: PodStreamsOptions,
  ) {}

  /** A destination the routing table gave this cluster, parsed there (claim.name / claim.isIp). */
  async open(request: OpenRequest, claim: RouteClaim, signal: AbortSignal): Promise<OpenedStream> {
    const plan = await this.resolver.resolveParsed(claim.host, request.destination.port, claim, request.client);
    return this.openPlan(plan, signal, request.frontEnd === 'http-forward');
  }

  /**
   * Streams to the pod ports of a plan, in its order (also for ingress hosts: the controller's pods).
   * `pooled`: the stream may serve later connections (the HTTP listener's), so it says whether its
   * pod is still one the plan's Service would pick.
   */
  async openPlan(plan: Plan, signal: AbortSignal, pooled = false): Promise<OpenedStream> {
    const candidates = this.acceptingFirst(plan.candidates);
    let next = 0;
    let current = '';
    const at: { c?: PodPort } = {};
    // One endpoint per connection is left for being slow: when the API path itself is slow (every
    // tunnel takes seconds), cutting each in turn would spend the connect timeout on cuts.
    let slowCutLeft = true;
    // Tries the candidates from `next` on; a retryable failure moves to the one after.
    const attempt = async (sig: AbortSignal): Promise<OpenedStream> => {
      let lastError: unknown;
      while (next < candidates.length) {
        const c = candidates[next++];
        const via = `${c.namespace}/${c.pod}:${c.port}`;
        // With another endpoint left, this one gets a few seconds, not the whole connect timeout.
        const slow = slowCutLeft && next < candidates.length ? new SlowOpen(sig, this.options.slowOpenMs ?? SLOW_OPEN_MS) : undefined;
        try {
          const confirmMs = this.isConfirmed(c) ? 0 : this.options.confirmMs;
          const stream = await this.transport.open(c, { signal: slow?.signal ?? sig, confirmMs });
          this.markConfirmed(c);
          plan.opened?.(c);
          current = via;
          at.c = c;
          return { stream, via, transport: this.transport.carrierOf?.(stream) ?? this.transport.name };
        } catch (err) {
          if (slow?.fired && !sig.aborted) {
            slowCutLeft = false;
            lastError = new ConnectTimeoutError(`port-forward to ${via} did not open within ${slow.ms} ms`, { cause: err, retryable: true });
            this.putLast(via);
            this.log.debug({ target: plan.label, via, error: errorMessage(lastError), retry: true }, 'endpoint failed');
            continue;
          }
          lastError = err;
          this.noteFailure(via, err);
          const retry = err instanceof ProxyError && err.retryable && !sig.aborted && next < candidates.length;
          this.log.debug({ target: plan.label, via, error: errorMessage(err), retry }, 'endpoint failed');
          if (!retry) break;
        } finally {
          slow?.done();
        }
      }
      throw lastError;
    };
    const first = await attempt(signal);
    const stillRouted = pooled ? stillPickedCheck(plan.stillPicked, at) : undefined;
    if (stillRouted) first.stillRouted = stillRouted;
    if (next >= candidates.length) {
      // Nowhere left to move to: a wrapper would only pass bytes through a second stream layer
      // for the connection's life. A refusal still marks the port, so the next stream waits.
      this.noteFailuresOf(first.stream, first.via);
      return first;
    }
    let movedTo: ((via: string) => void) | undefined;
    const stream = new RetryBeforeFirstByte(first.stream, async (err, gone) => {
      const from = current;
      this.noteFailure(from, err);
      if (next >= candidates.length) {
        this.log.info({ target: plan.label, via: from, error: err.message }, 'pod refused after the stream opened; no other endpoint left');
        return undefined;
      }
      const sig = AbortSignal.any([gone, AbortSignal.timeout(this.options.reopenTimeoutMs ?? DEFAULT_REOPEN_TIMEOUT_MS)]);
      const moved = await attempt(sig).catch(() => undefined);
      this.log.info(
        { target: plan.label, from, to: moved?.via, error: err.message },
        moved ? 'pod refused after the stream opened; moved to another endpoint' : 'pod refused after the stream opened; no other endpoint accepted',
      );
      if (moved) movedTo?.(moved.via);
      return moved?.stream;
    });
    // A refusal that cannot move (the client sent more than is kept for a replay) marks the port too.
    stream.on('error', (err) => this.noteFailure(current, err));
    return { stream, via: first.via, transport: first.transport, onMove: (listener) => (movedTo = listener), ...(stillRouted ? { stillRouted } : {}) };
  }

  /**
   * A listener that holds only `via` and this route: one defined inside openPlan would keep its
   * whole scope (the plan, the candidates) for the stream's life.
   */
  private noteFailuresOf(stream: Duplex, via: string): void {
    // Failed already (a refusal in the same burst of frames as the set-up): its 'error' went out
    // before this listener could hear it.
    if (stream.errored) this.noteFailure(via, stream.errored);
    else stream.on('error', (err) => this.noteFailure(via, err));
  }

  /** A refused port is no longer trusted to accept, and goes last for a while. */
  private noteFailure(via: string, err: unknown): void {
    if (!(err instanceof ProxyError) || err.reason !== 'connection-refused') return;
    this.putLast(via);
  }

  /** Candidates in the resolver's (round-robin) order, ports that refused recently last. */
  private acceptingFirst(candidates: PodPort[]): PodPort[] {
    if (this.refused.size === 0) return candidates;
    const now = Date.now();
    const late = (p: PodPort) => (this.refused.get(`${p.namespace}/${p.pod}:${p.port}`) ?? 0) > now;
    return [...candidates.filter((p) => !late(p)), ...candidates.filter(late)];
  }

  /** Refused, or did not open in time: no longer trusted to accept, and tried after the others for a while. */
  private putLast(via: string): void {
    this.confirmed.delete(via);
    if (this.refused.size >= CONFIRMED_MAX) this.refused.clear();
    this.refused.set(via, Date.now() + REFUSED_TTL_MS);
  }

  private isConfirmed(p: PodPort): boolean {
    const until = this.confirmed.get(`${p.namespace}/${p.pod}:${p.port}`);
    return until !== undefined && until > Date.now();
  }

  private markConfirmed(p: PodPort): void {
    if (this.confirmed.size >= CONFIRMED_MAX) this.confirmed.clear();
    this.confirmed.set(`${p.namespace}/${p.pod}:${p.port}`, Date.now() + CONFIRMED_TTL_MS);
    this.refused.delete(`${p.namespace}/${p.pod}:${p.port}`);
  }
}

/** Outside openPlan, so the closure holds the check and the pod it opened on, not the plan. */
function stillPickedCheck(check: Plan['stillPicked'], at: { c?: PodPort }): (() => boolean) | undefined {
  return check ? () => at.c === undefined || check(at.c) : undefined;
}

/**
 * One endpoint's time to open: aborts when `outer` does or after `ms`. No AbortSignal.any (it
 * stays registered on `outer` for the connection's life); done() lets go of `outer` and the timer.
 */
class SlowOpen {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  fired = false;

  constructor(
    private readonly outer: AbortSignal,
    readonly ms: number,
  ) {
    this.timer = setTimeout(() => {
      this.fired = true;
      this.controller.abort(new Error(`not open within ${ms} ms`));
    }, ms);
    if (outer.aborted) this.controller.abort(outer.reason);
    else outer.addEventListener('abort', this, { once: true });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The outer signal aborted (EventListener object: no closure). */
  handleEvent(): void {
    this.controller.abort(this.outer.reason);
  }

  done(): void {
    clearTimeout(this.timer);
    this.outer.removeEventListener('abort', this);
  }
}
