import type { AddressInfo } from 'node:net';
import type { StreamTotals } from './stats.js';
import type { CacheStatus } from '../cluster/cache.js';
import type { PodTransportStats } from '../tunnel/spdy-transport.js';

/** A started proxy, as the commands see it. */
export interface RunningProxy {
  readonly socks?: AddressInfo;
  readonly http?: AddressInfo;
  /** Context and namespace actually in use (after kubeconfig defaults). */
  readonly context: string;
  readonly namespace: string;
  totals(): StreamTotals;
  /** Scope and per-watch state of the cluster cache (for `status`). */
  cacheStatus?(): CacheStatus;
  /** Per pod: the port-forward transport in use, its tunnels and streams (for `status`). */
  transports?(): PodTransportStats[];
  /** Stop accepting, let open streams finish for up to graceMs, release everything. */
  stop(graceMs: number): Promise<void>;
}
