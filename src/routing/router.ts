// The Router owns the routing table: for every connection it asks the matcher once (table.ts),
// refuses what no route claims (we are no open relay), hands the claim to the route that claimed
// it, and enforces the connect timeout. Routes wait for or report their own readiness, so a
// cluster that is down or still syncing holds up only its own destinations.
//
// A reload swaps the whole generation (matcher + routes) at once: streams already open stay with
// the routes they came from; new ones see the new table. The composition root builds and starts
// the new routes before the swap and closes the ones that left after it.
import type { OpenRequest, OpenedStream, StreamOpener } from '../core/types.js';
import {
  ConnectTimeoutError,
  NotAllowedError,
  OverloadedError,
  PortForwardForbiddenError,
  ProxyError,
  RouteUnavailableError,
  withMessagePrefix,
} from '../core/errors.js';
import { refusalError, type Claim, type Decision, type RouteMatcher } from './table.js';
import { abortable } from '../core/abort.js';
import { formatHostPort } from '../core/address.js';
import type { Route } from '../routes/route.js';

/** How long an IP literal no rule claims waits for the clusters' Pod IP look-ups before it is decided. */
export const LOOKUP_WAIT_MS = 3_000;

export interface RouterOptions {
  connectTimeoutMs: number;
}

/** One routing table in force: the matcher and the live route for each route name in it. */
export interface TableGeneration {
  readonly matcher: RouteMatcher;
  readonly routes: ReadonlyMap<string, Route>;
}

/** An opened stream, with the route that carries it (stream statistics count per route: listeners/stream-stats.ts). */
export type RoutedStream = OpenedStream & { route: string };

export class Router implements StreamOpener {
  private closed = false;

  constructor(
    private generation: TableGeneration,
    private readonly options: RouterOptions,
  ) {}

  get current(): TableGeneration {
    return this.generation;
  }

  /** Puts a new table in force for new connections; returns the one it replaced. */
  swap(next: TableGeneration): TableGeneration {
    const previous = this.generation;
    this.generation = next;
    return previous;
  }

  close(): void {
    this.closed = true;
  }

  /** The decision for a destination under the current table (no stream opened). */
  decide(request: Pick<OpenRequest, 'destination'>): Decision {
    return this.generation.matcher.match(request.destination);
  }

  async open(request: OpenRequest): Promise<RoutedStream> {
    if (this.closed) throw new OverloadedError('the proxy is shutting down');
    // One controller and one timer per connection, both released when open() returns (cheaper
    // than AbortSignal.timeout + any(), which every connection paid for in CPU and heap).
    const deadline = new AbortController();
    const signal = deadline.signal;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      // The reason AbortSignal.timeout() gives: routes tell a timeout from a client leaving by its name.
      deadline.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
    }, this.options.connectTimeoutMs);
    const onClientAbort = (): void => deadline.abort(request.signal.reason);
    if (request.signal.aborted) onClientAbort();
    else request.signal.addEventListener('abort', onClientAbort, { once: true });
    const { routes, matcher } = this.generation;
    try {
      let decision = matcher.match(request.destination);
      if (this.worthLookingUp(request, decision)) {
        // A cluster still starting or syncing cannot say yet whether the IP is one of its
        // ClusterIPs: wait for it (names wait so too), up to the connect timeout.
        const settling = [...routes.values()].flatMap((r) => r.whenSettled?.(signal) ?? []);
        if (settling.length > 0) {
          await abortable(Promise.all(settling), signal);
          decision = matcher.match(request.destination);
        }
      }
      if (this.worthLookingUp(request, decision)) {
        // A Pod IP no watch covers (pods are looked up, not watched): ask the clusters, then decide.
        // Waited for LOOKUP_WAIT_MS at most: one slow cluster must not hold every unclaimed IP (a
        // look-up has its own, longer deadline, and goes on to fill its cache for the next stream).
        let waited: NodeJS.Timeout | undefined;
        const unsure = new Map<string, string>();
        const asking = [...routes].flatMap(([name, r]) => {
          const learning = r.learnIp?.(request.destination.host, signal);
          if (!learning) return [];
          unsure.set(name, `route ${name} has not answered whether it is a Pod IP within ${LOOKUP_WAIT_MS} ms`);
          return [learning.then((why) => (why ? unsure.set(name, why) : unsure.delete(name)))];
        });
        await Promise.race([abortable(Promise.all(asking), signal), new Promise((resolve) => (waited = setTimeout(resolve, LOOKUP_WAIT_MS)))]).finally(() =>
          clearTimeout(waited),
        );
        decision = matcher.match(request.destination);
        // Unknown because a cluster could not say (its API server gone silent): the refusal says so.
        if (!decision.claimed && unsure.size > 0) decision = { ...decision, message: `${decision.message}; ${[...unsure.values()].join('; ')}` };
      }
      for (;;) {
        if (!decision.claimed) throw refusalError(decision);
        try {
          return await this.openOn(routes, decision, request, signal);
        } catch (err) {
          const fallback = fallbackFor(decision, err, matcher);
          if (!fallback) throw err;
          // Refused below too: what the route that tried first said is part of the answer.
          if (!fallback.claimed && err instanceof ProxyError) throw refusalError({ ...fallback, message: `${fallback.message}; ${err.message}` });
          decision = fallback;
        }
      }
    } catch (err) {
      if (timedOut && !(err instanceof ProxyError && err.reason !== 'timeout')) {
        // What the route was waiting for, when it said (a cluster still syncing, a slow dial).
        const what = err instanceof ProxyError ? `: ${err.message}` : '';
        throw new ConnectTimeoutError(
          `could not open a stream to ${formatHostPort(request.destination.host, request.destination.port)} within ${this.options.connectTimeoutMs} ms${what}`,
          { cause: err },
        );
      }
      throw err;
    } finally {
      clearTimeout(timer);
      request.signal.removeEventListener('abort', onClientAbort);
    }
  }

  /** Whether the table in force sends a destination to this very route (its claim, or the claim's fallback). */
  private routesTo(destination: OpenRequest['destination'], route: Route): boolean {
    const { matcher, routes } = this.generation;
    const decision = matcher.match(destination);
    const fallbacks = decision.claimed && decision.reason === 'known-ip' ? [matcher.matchIpAsUnknown(decision.host)] : [];
    for (let d: Decision | undefined = decision; d; d = d.claimed ? (d.fallback ?? fallbacks.shift()) : undefined) {
      if (d.claimed && routes.get(d.route.name) === route) return true;
    }
    return false;
  }

  /** An IP literal that would be refused, go direct or hit a /0 block: a cluster may yet know it. */
  private worthLookingUp(request: OpenRequest, d: Decision): boolean {
    if (request.destination.type === 'domain' && !/^[0-9.]+$|:/.test(request.destination.host)) return false;
    return !d.claimed || d.reason === 'direct' || (d.reason === 'cidr' && /\/0$/.test(d.pattern ?? ''));
  }

  private async openOn(routes: ReadonlyMap<string, Route>, claim: Claim, request: OpenRequest, signal: AbortSignal): Promise<RoutedStream> {
    const route = routes.get(claim.route.name);
    if (!route) throw new NotAllowedError(`route ${claim.route.name} is not running`);
    try {
      const opened = await route.open(request, claim, signal);
      // Only pooled streams are reused (the HTTP listener's): no closure per SOCKS or CONNECT stream.
      if (request.frontEnd !== 'http-forward') return { ...opened, route: route.name };
      const destination = request.destination;
      // The route's own check too (a cluster route: the pod is still an endpoint of the Service).
      const own = opened.stillRouted;
      const stillRouted = own ? () => own() && this.routesTo(destination, route) : () => this.routesTo(destination, route);
      return { ...opened, route: route.name, stillRouted };
    } catch (err) {
      // Every failure names the route it was on (two clusters may both have a demo/web).
      if (!(err instanceof ProxyError) || err.message.includes(`route ${route.name}`)) throw err;
      throw withMessagePrefix(err, `${route.label ?? `${route.kind} route ${route.name}`}: `);
    }
  }
}

/**
 * Where a claimed connection goes when its route could not take it, if anywhere. "svc.ns" whose
 * namespace the cluster could not confirm: not a cluster name after all (NotAllowed once it has
 * synced), or the cluster cannot tell because it is down — then `github.com` must not fail with it
 * when the rules below send it elsewhere (when they refuse it, the cluster's own error says more).
 * A known IP the cluster refuses (a node's) goes where it would if no cluster knew it — but not
 * because the cluster is down: its ClusterIPs are not to be dialled into another network.
 */
function fallbackFor(decision: Claim, err: unknown, matcher: RouteMatcher): Decision | undefined {
  // The route found the pod (by name or by its IP): the destination was its own, and the client
  // is told why it was refused — a Pod IP is not dialled from here instead.
  if (err instanceof PortForwardForbiddenError) return undefined;
  if (decision.reason === 'known-ip') {
    const unknown = err instanceof NotAllowedError ? matcher.matchIpAsUnknown(decision.host) : undefined;
    return unknown?.claimed ? unknown : undefined;
  }
  const fallback = decision.fallback;
  return err instanceof NotAllowedError || (err instanceof RouteUnavailableError && fallback?.claimed === true) ? fallback : undefined;
}
