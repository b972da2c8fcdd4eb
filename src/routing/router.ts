import type { Destination, OpenRequest, OpenedStream, StreamOpener } from '../core/types.js';
import { ConnectTimeoutError, NotAllowedError, OverloadedError, ProxyError } from '../core/errors.js';
import { abortable } from '../core/abort.js';

/** A destination space served one way: one cluster today; later SSH jump hosts, direct pass-through. */
export interface Route {
  readonly name: string;
  /** Synchronous and cheap: is this destination this route's to serve? */
  claims(destination: Destination): boolean;
  open(request: OpenRequest, signal: AbortSignal): Promise<OpenedStream>;
}

export interface RouterOptions {
  connectTimeoutMs: number;
  /** Resolves when the routes are ready to answer (caches synced); requests wait for it. */
  ready?: Promise<void>;
}

/**
 * Picks the route for each destination and enforces the connect timeout. The first route that
 * claims a destination serves it; when none does, the first route answers, so that its resolver
 * can say precisely why (not a cluster name → not allowed: we are no open relay).
 * Suffix routing across clusters will replace the "first claim" rule here and nowhere else.
 */
export class Router implements StreamOpener {
  private closed = false;

  constructor(
    private readonly routes: Route[],
    private readonly options: RouterOptions,
  ) {}

  close(): void {
    this.closed = true;
  }

  async open(request: OpenRequest): Promise<OpenedStream> {
    if (this.closed) throw new OverloadedError('the proxy is shutting down');
    const timeout = AbortSignal.timeout(this.options.connectTimeoutMs);
    const signal = AbortSignal.any([request.signal, timeout]);
    try {
      if (this.options.ready) await abortable(this.options.ready, signal);
      const dest = request.destination;
      const route = this.routes.find((r) => r.claims(dest)) ?? this.routes[0];
      if (!route) throw new NotAllowedError(`no route serves ${dest.host}`);
      return await route.open(request, signal);
    } catch (err) {
      if (timeout.aborted && !(err instanceof ProxyError && err.reason !== 'timeout')) {
        throw new ConnectTimeoutError(`could not open a stream to ${request.destination.host}:${request.destination.port} within ${this.options.connectTimeoutMs} ms`, { cause: err });
      }
      throw err;
    }
  }
}
