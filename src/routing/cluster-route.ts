import type { Logger } from '../core/log.js';
import type { Destination, OpenRequest, OpenedStream } from '../core/types.js';
import { ProxyError, errorMessage } from '../core/errors.js';
import type { PodPort, Transport } from '../tunnel/transport.js';
import type { Resolver } from './resolver.js';
import type { Route } from './router.js';

export interface ClusterRouteOptions {
  /**
   * The v4 port-forward protocol never says "dialled": a refused port only shows as error text
   * shortly after the tunnel opens. For a pod port we have not seen accept recently we wait this
   * long for that text, so the client gets "connection refused" instead of success-then-close.
   */
  confirmMs: number;
}

/** A pod port that accepted within this time is trusted to accept again without the wait. */
const CONFIRMED_TTL_MS = 5 * 60_000;
const CONFIRMED_MAX = 10_000;

/** Serves one cluster: resolve through the watch cache, then open a stream with the transport. */
export class ClusterRoute implements Route {
  private readonly confirmed = new Map<string, number>();

  constructor(
    readonly name: string,
    private readonly resolver: Resolver,
    private readonly transport: Transport,
    private readonly log: Logger,
    private readonly options: ClusterRouteOptions,
  ) {}

  claims(destination: Destination): boolean {
    return this.resolver.claims(destination);
  }

  async open(request: OpenRequest, signal: AbortSignal): Promise<OpenedStream> {
    const plan = await this.resolver.resolve(request.destination);
    let lastError: unknown;
    for (const [attempt, c] of plan.candidates.entries()) {
      const via = `${c.namespace}/${c.pod}:${c.port}`;
      try {
        const stream = await this.transport.open(c, { signal, confirmMs: this.isConfirmed(c) ? 0 : this.options.confirmMs });
        this.markConfirmed(c);
        // A dial error after we called it open means the port stopped accepting: re-check next time.
        stream.once('error', (err) => {
          if (err instanceof ProxyError && err.reason === 'connection-refused') this.confirmed.delete(via);
        });
        return { stream, via };
      } catch (err) {
        lastError = err;
        const retry = err instanceof ProxyError && err.retryable && !signal.aborted && attempt + 1 < plan.candidates.length;
        this.log.debug({ target: plan.label, via, error: errorMessage(err), retry }, 'endpoint failed');
        if (!retry) break;
      }
    }
    throw lastError;
  }

  private isConfirmed(p: PodPort): boolean {
    const until = this.confirmed.get(`${p.namespace}/${p.pod}:${p.port}`);
    return until !== undefined && until > Date.now();
  }

  private markConfirmed(p: PodPort): void {
    if (this.confirmed.size >= CONFIRMED_MAX) this.confirmed.clear();
    this.confirmed.set(`${p.namespace}/${p.pod}:${p.port}`, Date.now() + CONFIRMED_TTL_MS);
  }
}
