// `status`: every managed proxy, reaped, with live figures asked from each daemon over its
// control socket. A daemon that is gone shows as "dead" (with why), never as an error; one that
// runs elsewhere (registry.ts) as "elsewhere", with what was recorded and nothing asked.
import { formatAddress } from '../listeners/bound-address.js';
import { apiServersOf } from '../routes/route.js';
import type { CacheStatus } from '../cluster/cache.js';
import type { StreamTotals } from '../listeners/stream-stats.js';
import type { PodTransportStats } from '../tunnel/spdy-transport.js';
import type { RouteStatus } from '../routes/route.js';
import { withStateLock } from '../state/lock.js';
import { stateDirExists, type StateLayout } from '../state/paths.js';
import { queryStatus } from './control.js';
import { controlSocketOf, type ListenAddress, type ProxyEntry } from './store.js';
import { inspect, inspectAll, type Inspected, type LiveState } from './registry.js';
import { UnknownIdError } from './stop.js';

export interface ProxyStatus {
  id: string;
  state: LiveState;
  context: string;
  namespace: string;
  server: string;
  /** The kubectl-proxyout version that started it; null when its entry is older than that record. */
  version: string | null;
  pid: number | null;
  socks: string | null;
  http: string | null;
  /** Each port mapping: the address it bound (LPORT 0 resolved), that port, and its target. */
  forwards?: Array<{ listen: string; port: number; target: string }>;
  createdAt: string;
  startedAt: string | null;
  uptimeSeconds: number | null;
  openStreams: number | null;
  totalStreams: number | null;
  failedStreams: number | null;
  bytesFromClients: number | null;
  bytesToClients: number | null;
  failuresByReason: Record<string, number>;
  /** The last request it could not serve (what it was told, when) and whether a stream opened since. */
  lastFailure?: StreamTotals['lastFailure'];
  cache: {
    state: string;
    scope?: string;
    namespaces?: string[];
    syncing?: Record<string, { listed: number; total?: number }>;
    /** Objects held per kind (services, endpointslices, pods, namespaces). */
    objects?: Record<string, number>;
  } | null;
  logFile: string;
  /**
   * Whether the daemon answered on its control socket (within 1.5 s): false for one that is
   * stopped (SIGSTOP) or hung, whose pid still runs. Only for running proxies.
   */
  answering?: boolean;
  error?: string;
  /** State elsewhere: the host it was recorded on (another machine or container sharing the state directory). */
  elsewhere?: string;
  /** Per pod: transport in use, tunnels, streams (running proxies that report them). */
  transports?: PodTransportStats[];
  /** Each route of the routing table: kind, what it serves, state (and why), streams, bytes. */
  routes?: RouteStatus[];
}

export async function collectStatus(l: StateLayout, id?: string): Promise<ProxyStatus[]> {
  if (!stateDirExists(l)) {
    if (id !== undefined) throw new UnknownIdError(id);
    return [];
  }
  const found = await withStateLock(l, () => {
    if (id === undefined) return inspectAll(l);
    const one = inspect(l, id);
    if (!one) throw new UnknownIdError(id);
    return [one];
  });
  return Promise.all(found.map((x) => withLive(l, x)));
}

async function withLive(l: StateLayout, { entry, state }: Inspected): Promise<ProxyStatus> {
  // A starting daemon answers too (its control socket opens before the cache syncs).
  const live = state === 'running' || state === 'stopping' || state === 'starting' ? await queryStatus(controlSocketOf(l, entry), 1_500) : undefined;
  const startedAt = entry.startedAt ?? null;
  return {
    id: entry.id,
    state: live?.phase === 'stopping' ? 'stopping' : state,
    context: entry.context,
    namespace: entry.namespace,
    server: entry.server,
    version: entry.programVersion ?? null,
    pid: entry.pid ?? null,
    // A starting daemon's listeners are up before state.json records them: it says where.
    socks: address(state, entry.socks ?? live?.listening?.socks),
    http: address(state, entry.http ?? live?.listening?.http),
    forwards:
      state === 'dead'
        ? []
        : (entry.forwards ?? live?.listening?.forwards ?? []).map((f) => ({ listen: formatAddress(f.address), port: f.address.port, target: f.target })),
    createdAt: entry.createdAt,
    startedAt,
    uptimeSeconds: live
      ? Math.round(live.uptimeMs / 1000)
      : state !== 'dead' && state !== 'elsewhere' && startedAt
        ? Math.round((Date.now() - Date.parse(startedAt)) / 1000)
        : null,
    openStreams: live?.totals.openStreams ?? null,
    totalStreams: live?.totals.totalStreams ?? null,
    failedStreams: live?.totals.failedStreams ?? null,
    bytesFromClients: live?.totals.bytesFromClients ?? null,
    bytesToClients: live?.totals.bytesToClients ?? null,
    failuresByReason: live?.totals.failuresByReason ?? {},
    ...(live?.totals.lastFailure ? { lastFailure: live.totals.lastFailure } : {}),
    // A daemon that answers without a cache has no cluster route: nothing syncs, nothing to show.
    cache: live?.cache ? cacheSummary(live.cache) : !live && state === 'starting' ? { state: 'syncing' } : null,
    logFile: l.logFile(entry.id),
    // Not counted while it starts or stops: its control socket opens a moment after it is spawned
    // and closes a moment before it exits.
    ...(state === 'running' ? { answering: live !== undefined } : {}),
    ...(entry.error && state === 'dead' ? { error: entry.error } : {}),
    ...(state === 'elsewhere' ? { elsewhere: entry.space?.hostname ?? 'unknown' } : {}),
    ...(live?.transports ? { transports: live.transports } : {}),
    ...(live?.routes ? { routes: live.routes } : {}),
  };
}

function address(state: LiveState, a: ListenAddress | undefined): string | null {
  return a && state !== 'dead' ? formatAddress(a) : null;
}

/**
 * One word for the cache: synced, syncing, retrying (a watch is reconnecting) or stopped; while
 * syncing, per kind the objects listed so far (and of how many, when the API server says).
 */
export function cacheSummary(cache: CacheStatus | undefined): ProxyStatus['cache'] {
  if (!cache) return { state: 'unknown' };
  const states = Object.values(cache.watches);
  const state = states.includes('retrying')
    ? 'retrying'
    : states.includes('starting')
      ? 'syncing'
      : states.length > 0 && states.every((s) => s === 'stopped')
        ? 'stopped'
        : 'synced';
  const syncing = cache.syncing && Object.keys(cache.syncing).length ? cache.syncing : undefined;
  return { state, scope: cache.scope, namespaces: cache.namespaces, ...(syncing ? { syncing } : {}), ...(cache.objects ? { objects: cache.objects } : {}) };
}

/**
 * The API servers of a managed proxy's cluster routes, as it reports them (NO_PROXY for the
 * variables we hand out: proxy/client-env.ts); the entry's default server when it does not answer.
 */
export async function managedApiServers(l: StateLayout, entry: Pick<ProxyEntry, 'id' | 'server' | 'controlSocket'>): Promise<string[]> {
  return (await askManaged(l, entry)).apiServers;
}

/** As managedApiServers, and whether the daemon answered at all (within 1.5 s: not stopped with SIGSTOP, not hung). */
export async function askManaged(
  l: StateLayout,
  entry: Pick<ProxyEntry, 'id' | 'server' | 'controlSocket'>,
): Promise<{ apiServers: string[]; answering: boolean; warnings: readonly string[] }> {
  const live = await queryStatus(controlSocketOf(l, entry), 1_500);
  const servers = apiServersOf(live?.routes ?? []);
  return { apiServers: servers.length > 0 ? servers : [entry.server], answering: live !== undefined, warnings: live?.warnings ?? [] };
}

/** What `status` says of a running proxy that does not answer, for the commands that hand it out. */
export function notAnswering(id: string): string {
  return `${id}: does not answer on its control socket (stopped or hung?); see kubectl proxyout logs ${id}, or stop it: kubectl proxyout disconnect ${id}`;
}

/**
 * A running proxy of another kubectl-proxyout: after an upgrade its daemon keeps running the code
 * it started with until it is connected again. Undefined when it is this version or not running.
 */
export function otherVersion(p: Pick<ProxyStatus, 'id' | 'state' | 'version'>, current: string): { started: string; fix: string } | undefined {
  if (p.state === 'dead' || p.state === 'elsewhere' || p.version === current) return undefined;
  const by = p.version === null ? 'an earlier kubectl-proxyout' : `kubectl-proxyout ${p.version}`;
  return { started: `started by ${by}, this is ${current}`, fix: `disconnect ${p.id} and connect it again to run this one` };
}
