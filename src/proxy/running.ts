import type { AddressInfo } from 'node:net';
import type { StreamTotals } from '../listeners/stream-stats.js';
import type { CacheStatus } from '../cluster/cache.js';
import type { PodTransportStats } from '../tunnel/spdy-transport.js';
import type { RouteStatus } from '../routes/route.js';
import type { RoutingTable } from '../routing/table-spec.js';
import type { FeedSubscriber } from '../ui/feed.js';

/** A port mapping as it runs: where it listens and the target it opens. */
export interface ForwardStatus {
  address: AddressInfo;
  /** TARGET:PORT as given. */
  target: string;
}

/** A started proxy, as the commands see it. */
export interface RunningProxy {
  readonly socks?: AddressInfo;
  readonly http?: AddressInfo;
  /** Each port mapping (--forward, config `forward`) with the address it bound. */
  readonly forwards?: ForwardStatus[];
  /** The default cluster route's context and namespace (after kubeconfig defaults). */
  readonly context: string;
  readonly namespace: string;
  totals(): StreamTotals;
  /** Scope and per-watch state of the cluster cache (for `status`). */
  cacheStatus?(): CacheStatus | undefined;
  /** Per pod: the port-forward transport in use, its tunnels and streams (for `status`). */
  transports?(): PodTransportStats[];
  /** Mistakes found at start that do not stop the proxy (a namespace that does not exist): one line each. */
  readonly warnings?: readonly string[];
  /** The routing table in force. */
  table(): RoutingTable;
  /** The PAC file it serves at /proxy.pac (throws when it has no TCP listener a browser could use). */
  pac(): string;
  /** Each route's kind, state and figures. */
  routes(): RouteStatus[];
  /** The live feed (ui/feed.ts): a snapshot, then events, until the returned function is called. */
  watch(subscriber: FeedSubscriber): () => void;
  /** The live page's URL with its token, when this proxy serves one (options.page and an HTTP listener on TCP). */
  readonly pageUrl?: string;
  /**
   * Re-reads the table (or takes `next`), starts its new routes and swaps it in; rejects — and
   * changes nothing — when it does not parse or a new route cannot start.
   */
  reload(next?: { table: RoutingTable; routeKubeconfigs?: Record<string, string> }): Promise<void>;
  /** Stop accepting, let open streams finish for up to graceMs, release everything. */
  stop(graceMs: number): Promise<void>;
}
