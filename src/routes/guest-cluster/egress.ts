// How a guest cluster's API connections leave this machine: trusting the table's extra CA (a
// TLS-intercepting corporate proxy), and through the route that carries them when the cluster
// route says `via` (an ssh route: its API answers only behind that chain). The proxy and doctor
// both use it, so doctor reaches each API server the way the proxy does.
import type { EgressOptions, ExtraCA } from '../../cluster/egress-proxy.js';
import type { Route } from '../route.js';

/** How a cluster route's API connections leave: the extra CA trusted, and the route that carries them (`via`: an ssh route's carry). */
export function egressFor(extraCA: ExtraCA | undefined, carrier: Route | undefined): EgressOptions {
  return { ...(extraCA ? { extraCA } : {}), ...(carrier?.carry ? { via: { route: carrier.name, dial: carrier.carry.bind(carrier) } } : {}) };
}
