// What the proxy checks before it binds a port or opens a connection — the listen addresses,
// credentials on any listener other machines can reach, the routing table, the port mappings —
// in one place, so that `service-install` refuses a unit that would fail on every start with the
// very checks (and messages) the proxy itself would fail with. Every failure is a one-line
// StartupError.
import { StartupError, errorMessage } from '../core/errors.js';
import {
  forwardListenProblem,
  formatHostPort,
  parseForwardSpec,
  parseListenAddress,
  unixListenPath,
  type ForwardSpec,
  type HostPort,
} from '../core/address.js';
import { unixSocketPath } from '../state/paths.js';
import { loadKubeConfig } from '../cluster/kubeconfig.js';
import { loadExtraCA } from '../cluster/egress-proxy.js';
import { assertDirectAllowed } from '../routes/direct/route.js';
import type { RoutingTable } from '../routing/table-spec.js';
import type { RouteSpec } from '../routes/spec.js';
import { defaultConfigPath, loadRoutingTable, type TableFlags } from '../config/load.js';
import { requireCredentialsOffLoopback } from '../auth/credentials.js';
import type { ProxyOptions } from './options.js';

export type TcpListen = { flag: string; host: string; port: number };
export type ListenSpec = TcpListen | { flag: string; unix: string };

/** The options these checks read. */
export type StartOptions = Pick<
  ProxyOptions,
  | 'listenSocks'
  | 'listenHttp'
  | 'forwards'
  | 'proxyAuth'
  | 'kubeconfig'
  | 'context'
  | 'contexts'
  | 'currentContext'
  | 'config'
  | 'defaultConfig'
  | 'direct'
  | 'directByDefault'
  | 'extraCA'
  | 'table'
  | 'clusterDomain'
>;

export interface StartPlan {
  socks?: ListenSpec;
  http?: ListenSpec;
  /** The TCP listeners (unix sockets are local by construction: 0600 in a private directory). */
  listens: TcpListen[];
  table: RoutingTable;
  /** Each with where it was given, for messages: `--forward` or the config file's `forward[N]`. */
  forwards: Array<ForwardSpec & { flag: string }>;
}

/** The routing table the options ask for: --config / the default file, --context…, --direct. */
export function routingTableFor(options: StartOptions): RoutingTable {
  if (options.table) return options.table;
  const flags: TableFlags = {
    config: options.config,
    contexts: options.contexts ?? (options.context ? [options.context] : []),
    direct: options.direct,
    directByDefault: options.directByDefault,
    clusterDomain: options.clusterDomain,
    extraCA: options.extraCA,
    // Read only when the table names no cluster: then the kubeconfig's current context serves.
    get currentContext() {
      return options.currentContext ?? loadKubeConfig({ kubeconfig: options.kubeconfig }).context;
    },
  };
  return loadRoutingTable(flags, options.defaultConfig ?? defaultConfigPath());
}

/** Everything startProxy checks before it listens. */
export function planStart(options: StartOptions): StartPlan {
  const socks = options.listenSocks ? parseListen(options.listenSocks, '--listen-socks', 'socks') : undefined;
  const http = options.listenHttp ? parseListen(options.listenHttp, '--listen-http', 'http') : undefined;
  const listens = [socks, http].filter((a): a is TcpListen => a !== undefined && 'host' in a);
  // One port cannot serve both protocols: the bind would fail blaming "another proxy".
  const [first, second] = listens;
  if (second && first!.port !== 0 && first!.port === second.port && sameOrWildcard(first!.host, second.host)) {
    throw new StartupError(
      `${second.flag} ${formatHostPort(second.host, second.port)}: that port is already ${first!.flag}'s; the SOCKS and HTTP listeners each need a port of their own`,
    );
  }
  requireCredentialsOffLoopback(listens, !!options.proxyAuth);
  const table = routingTableFor(options);
  const file = options.config ?? defaultConfigPath();
  const given = [
    ...(options.forwards ?? []).map((text) => ({ text, flag: '--forward' })),
    ...(table.forwards ?? []).map((text, i) => ({ text, flag: `${file}: forward[${i}]` })),
  ];
  const forwards = forwardSpecs(given, listens);
  if (!socks && !http && forwards.length === 0) throw new StartupError('nothing to listen on: give --listen-socks, --listen-http and/or --forward');
  assertDirectAllowed(table, listens, !!options.proxyAuth);
  return { socks, http, listens, table, forwards };
}

/**
 * Where a proxy with these options listens over TCP, without the other checks: another managed
 * proxy's, still starting, which records its addresses only once it has bound them.
 */
export function tcpAddressesOf(options: Pick<StartOptions, 'listenSocks' | 'listenHttp' | 'forwards' | 'table'>): HostPort[] {
  const listens = [
    options.listenSocks ? parseListen(options.listenSocks, '--listen-socks', 'socks') : undefined,
    options.listenHttp ? parseListen(options.listenHttp, '--listen-http', 'http') : undefined,
  ].filter((a): a is TcpListen => a !== undefined && 'host' in a);
  const forwards = forwardSpecs(
    [...(options.forwards ?? []), ...(options.table?.forwards ?? [])].map((text) => ({ text, flag: '--forward' })),
    listens,
  );
  return [...listens.map(({ host, port }) => ({ host, port })), ...forwards.map((f) => f.listen)];
}

/**
 * The files the table's routes load when they are built (proxy/build-table.ts): the extra CA, and the
 * kubeconfig and context of each route that names one. What only the network can tell is not
 * checked here.
 */
export function checkRouteFiles(table: RoutingTable, kubeconfig: string | undefined): void {
  if (table.extraCA) loadExtraCA(table.extraCA);
  for (const route of table.routes) {
    if (route.kind === 'cluster' || route.kind === 'konnectivity') fromConfigFile(route, () => loadKubeConfig({ kubeconfig, context: route.context }));
  }
}

/** host:port, or unix:PATH (state/paths.ts unixSocketPath: "" or a bare name is in the state directory). */
export function parseListen(value: string, flag: string, kind: 'socks' | 'http'): ListenSpec {
  try {
    const unix = unixListenPath(value);
    if (unix !== undefined) return { flag, unix: unixSocketPath(unix, kind) };
    return { flag, ...parseListenAddress(value) };
  } catch (err) {
    throw new StartupError(`${flag} ${value}: ${errorMessage(err)}`);
  }
}

/**
 * Each mapping parsed; a mapping on the fixed local port of another mapping or of our own
 * --listen-socks/--listen-http is an error before binding (the bind would blame another program).
 */
function forwardSpecs(given: ReadonlyArray<{ text: string; flag: string }>, listens: readonly TcpListen[]): Array<ForwardSpec & { flag: string }> {
  const seen: Array<ForwardSpec & { flag: string; text: string }> = [];
  return given.map(({ text, flag }) => {
    let spec: ForwardSpec;
    try {
      spec = parseForwardSpec(text);
    } catch (err) {
      throw new StartupError(`${flag} ${text}: ${errorMessage(err)}`);
    }
    const problem = forwardListenProblem(spec);
    if (problem) throw new StartupError(`${flag} ${text}: ${problem}`);
    const where = formatHostPort(spec.listen.host, spec.listen.port);
    const clashes = (host: string, port: number) => spec.listen.port !== 0 && port === spec.listen.port && sameOrWildcard(host, spec.listen.host);
    const other = seen.find((o) => clashes(o.listen.host, o.listen.port));
    // The same mapping twice (a flag repeating the config file, a copied line) says so.
    if (other?.text === text) throw new StartupError(`${flag} ${text}: given twice${other.flag === flag ? '' : ` (also ${other.flag})`}`);
    if (other) throw new StartupError(`${flag} ${text}: ${where} is already used by the mapping ${other.text}`);
    const listener = listens.find((l) => clashes(l.host, l.port));
    if (listener) throw new StartupError(`${flag} ${text}: ${where} is already used by ${listener.flag} ${formatHostPort(listener.host, listener.port)}`);
    seen.push({ ...spec, flag, text });
    return { ...spec, flag };
  });
}

/**
 * Whether two listen hosts take the same port: the same address, a wildcard of the other's family
 * (:: takes both), or `localhost`, which a mapping binds on 127.0.0.1 and ::1 both.
 */
function sameOrWildcard(a: string, b: string): boolean {
  const covers = (wild: string, h: string) => wild === '::' || (wild === '0.0.0.0' && !h.includes(':'));
  const addresses = (h: string) => (h.toLowerCase() === 'localhost' ? ['127.0.0.1', '::1'] : [h.toLowerCase()]);
  return addresses(a).some((x) => addresses(b).some((y) => x === y || covers(x, y) || covers(y, x)));
}

/**
 * A route of the config file that cannot be made (its context is not in the kubeconfig): the
 * error names the file, line and route, as the file's own errors do, not the context alone.
 */
export function fromConfigFile<T>(spec: RouteSpec, make: () => T): T {
  try {
    return make();
  } catch (err) {
    const file = /^(.*):\d+$/.exec(spec.origin)?.[1];
    if (err instanceof StartupError && file !== undefined && !err.message.includes(file)) err.message = `${spec.origin}: route ${spec.name}: ${err.message}`;
    throw err;
  }
}
