// Flags and config file → one validated routing table.
//
// Precedence (docs/usage.md "Config file"):
//  1. The file: `--config FILE` (it must exist); else `config.yaml` in the user's config directory
//     when it exists and no --context is given (a command line naming contexts stands alone, as
//     before config files existed); else none.
//  2. Routes: each --context C, in flag order, is the file's cluster route for context C (or the
//     cluster route named like C) when there is one, else a new cluster route named after C. Then
//     the file's other routes, in file order.
//  3. Default route: the first --context; else the file's `default: true`; else the first cluster route.
//  4. Direct pass-through: --direct / --no-direct when given; else the file's `direct`; else off
//     (on for exec's temporary proxy).
//  5. No route at all (no --context, no file routes): one for the kubeconfig's current context.
// The result is checked by building a RouteMatcher (no two routes may claim the same suffix or CIDR).
import { NotRegularFileError, readRegularBytes } from '../core/regular-file.js';
import { kubeconfigText } from '../cluster/kubeconfig-files.js';
import path from 'node:path';
import { homedir } from 'node:os';
import envPaths from 'env-paths';
import { StartupError } from '../core/errors.js';
import { RouteMatcher } from '../routing/table.js';
import { RoutingTableError } from '../routing/suffix-index.js';
import { DIRECT_ROUTE_NAME, routeNameForContext, routeNameProblem, type RoutingTable } from '../routing/table-spec.js';
import { hasClusterNames, type ClusterRouteSpec, type RouteSpec } from '../routes/spec.js';
import { parseConfig, type ConfigFile } from './validate.js';

export const CONFIG_FILE_NAME = 'config.yaml';

/**
 * `config.yaml` in the per-user config directory: $XDG_CONFIG_HOME/kubectl-proxyout
 * (~/.config/kubectl-proxyout) on Linux and other Unixes, env-paths' place on macOS and Windows.
 * A relative $XDG_CONFIG_HOME is invalid (XDG spec) and ignored: taken as it is, the file read
 * would change with the working directory.
 */
export function defaultConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  const APP = 'kubectl-proxyout';
  if (process.platform === 'darwin' || process.platform === 'win32') return path.join(envPaths(APP, { suffix: '' }).config, CONFIG_FILE_NAME);
  const xdg = env.XDG_CONFIG_HOME;
  return path.join(xdg && path.isAbsolute(xdg) ? xdg : path.join(homedir(), '.config'), APP, CONFIG_FILE_NAME);
}

export interface TableFlags {
  /** --config FILE */
  config?: string;
  /** --context, repeatable, in the order given. */
  contexts: string[];
  /** --direct (true) / --no-direct (false); undefined when neither was given. */
  direct?: boolean;
  /**
   * Direct pass-through when neither --[no-]direct nor the file's `direct` says: exec's temporary
   * proxy, whose only client (CMD, holding its generated password) could dial those hosts itself.
   */
  directByDefault?: boolean;
  /** --cluster-domain */
  clusterDomain: string;
  /** The kubeconfig's current context, used when no route names a cluster. */
  currentContext?: string;
  /** --extra-ca FILE (beats the file's extraCA). */
  extraCA?: string;
}

/** Reads the config file the flags point at (or the default one) and merges the flags into it. */
export function loadRoutingTable(flags: TableFlags, defaultPath: string = defaultConfigPath()): RoutingTable {
  const file = flags.config ?? (flags.contexts.length === 0 ? defaultPath : undefined);
  let config: ConfigFile | undefined;
  if (file !== undefined) {
    const text = readConfig(file, flags.config !== undefined);
    if (text !== undefined) config = parseConfig(text, file, flags.clusterDomain);
  }
  return tableFrom(config, flags);
}

function readConfig(file: string, required: boolean): string | undefined {
  try {
    // Decoded as kubectl decodes YAML: UTF-16 too when a byte-order mark says so (PowerShell 5's
    // `> config.yaml` writes UTF-16LE), which read as UTF-8 was "null byte is not allowed".
    return kubeconfigText(readRegularBytes(file));
  } catch (err) {
    if (err instanceof NotRegularFileError) throw new StartupError(`cannot read the config file: ${err.message}`, { cause: err });
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && !required) return undefined;
    throw new StartupError(`cannot read the config file ${file}: ${code === 'ENOENT' ? 'no such file' : (err as Error).message}`, { cause: err });
  }
}

/** The origin of the route made for the kubeconfig's current context (rule 5 above). */
const CURRENT_CONTEXT_ORIGIN = 'the current context';

/**
 * The context a table serves because it was the kubeconfig's current one, if any. A reload serves
 * it again rather than whatever is current by then: `kubectl config use-context` elsewhere must
 * not move a running proxy (and a managed one's ID and status) to another cluster.
 */
export function currentContextServed(table: RoutingTable | undefined): string | undefined {
  const route = table?.routes.find((r) => r.origin === CURRENT_CONTEXT_ORIGIN);
  return route?.kind === 'cluster' ? route.context : undefined;
}

/** Nothing configured and no current context: doctor says why the kubeconfig gave none instead. */
export class NoClusterToServeError extends StartupError {}

/** Merges flags into a validated file (or none) by the precedence above; pure, for tests. */
export function tableFrom(config: ConfigFile | undefined, flags: TableFlags): RoutingTable {
  const fileRoutes = config?.routes ?? [];
  const fromFlags: RouteSpec[] = [];
  const seen = new Set<string>();
  for (const context of flags.contexts) {
    if (seen.has(context)) throw new StartupError(`--context ${context} is given twice`);
    seen.add(context);
    const derived = contextRouteName(context, flags.clusterDomain);
    const existing = fileRoutes.find((r) => r.kind === 'cluster' && r.context === context) ?? fileRoutes.find((r) => r.name === derived);
    // A konnectivity route of the file serving this context: a second route for it would make
    // every ClusterIP and Pod IP known to two routes (refused), and its names served twice.
    const guest = existing ?? fileRoutes.find((r) => r.kind === 'konnectivity' && r.context === context);
    if (guest && guest.kind === 'konnectivity' && guest.context === context) {
      throw new StartupError(
        `--context ${context}: route "${guest.name}" (${guest.origin}) is a konnectivity route for this context; leave out --context, or make it the default with default: true`,
      );
    }
    if (existing && existing.kind !== 'cluster') {
      throw new StartupError(
        `--context ${context}: route "${existing.name}" (${existing.origin}) is a ${existing.kind} route, not a cluster; rename one of them`,
      );
    }
    if (existing && (existing as ClusterRouteSpec).context !== context) {
      throw new StartupError(
        `--context ${context}: route "${existing.name}" (${existing.origin}) is for context ${(existing as ClusterRouteSpec).context}; name the route for ${context} in the config file`,
      );
    }
    fromFlags.push(existing ?? clusterRoute(context, `--context ${context}`, flags.clusterDomain));
  }
  const routes = [...fromFlags, ...fileRoutes.filter((r) => !fromFlags.includes(r))];
  checkUniqueNames(routes);

  let defaultRoute = fromFlags[0]?.name ?? config?.defaultRoute ?? routes.find(hasClusterNames)?.name;
  // The kubeconfig's current context serves only when nothing else was configured: a table of
  // ssh, direct or reject routes alone needs no kubeconfig.
  if (defaultRoute === undefined && routes.length === 0) {
    if (!flags.currentContext)
      throw new NoClusterToServeError(
        'no cluster to serve: give --context, add a cluster route to the config file, or set a current context in the kubeconfig',
      );
    const route = clusterRoute(flags.currentContext, CURRENT_CONTEXT_ORIGIN, flags.clusterDomain);
    routes.unshift(route);
    checkUniqueNames(routes);
    defaultRoute = route.name;
  }

  checkVia(routes);
  const table: RoutingTable = { routes, defaultRoute, clusterDomain: flags.clusterDomain };
  const extraCA = flags.extraCA !== undefined ? path.resolve(flags.extraCA) : config?.extraCA;
  if (extraCA) table.extraCA = extraCA;
  if (config?.forwards?.length) table.forwards = config.forwards;
  if (config?.deprecations?.length) table.deprecations = config.deprecations;
  const direct = flags.direct ?? config?.direct ?? flags.directByDefault ?? false;
  if (direct) {
    const origin = flags.direct !== undefined ? '--direct' : config?.direct !== undefined ? `${config.file}:${config.directLine ?? 1}` : EXEC_DIRECT_ORIGIN;
    const named = routes.find((r) => r.name === DIRECT_ROUTE_NAME);
    if (named && named.kind !== 'direct') {
      throw new StartupError(
        `direct pass-through (${origin}) needs the route name "${DIRECT_ROUTE_NAME}", which route ${named.origin} uses for a ${named.kind} route; rename that route`,
      );
    }
    if (!named) routes.push({ kind: 'direct', name: DIRECT_ROUTE_NAME, include: [], exclude: [], cidrs: [], origin });
    table.directRoute = DIRECT_ROUTE_NAME;
  }
  try {
    new RouteMatcher(table);
  } catch (err) {
    if (err instanceof RoutingTableError) throw new StartupError(`invalid routing table: ${err.message}`, { cause: err });
    throw err;
  }
  return table;
}

/** The origin of the direct route `exec` adds by itself (neither --direct nor the config file asked). */
export const EXEC_DIRECT_ORIGIN = "exec's default (--no-direct turns it off)";

/**
 * routeNameForContext, and for a context named as a cluster DNS suffix ("localhost",
 * "dev.cluster.local"), which works with kubectl, a stand-in too ("localhost-context",
 * "dev-cluster-local"): the start was refused.
 */
function contextRouteName(context: string, clusterDomain: string): string {
  const name = routeNameForContext(context);
  if (!name || !routeNameProblem(name, 'cluster', clusterDomain)) return name;
  return name.includes('.') ? name.replace(/\./g, '-') : `${name}-context`;
}

function clusterRoute(context: string, origin: string, clusterDomain: string): ClusterRouteSpec {
  const name = contextRouteName(context, clusterDomain);
  const problem = name === '' ? 'it has no letters or digits' : routeNameProblem(name, 'cluster', clusterDomain);
  if (problem) throw new StartupError(`${origin}: context "${context}" cannot name a route (${problem}); give it a route in the config file with its own name`);
  return { kind: 'cluster', name, context, include: [], exclude: [], cidrs: [], origin };
}

/** `via` names an ssh route of the table (the only kind that can carry a connection today). */
function checkVia(routes: RouteSpec[]): void {
  for (const r of routes) {
    if (r.kind !== 'cluster' || r.via === undefined) continue;
    const carrier = routes.find((o) => o.name === r.via);
    const where = `${r.origin.replace(/:\d+$/, '')}:${r.viaLine ?? ''}`.replace(/:$/, '');
    if (!carrier) throw new StartupError(`${where}: route ${r.name}: via "${r.via}" names no route of the table`);
    if (carrier.kind !== 'ssh')
      throw new StartupError(`${where}: route ${r.name}: via "${r.via}" is a ${carrier.kind} route; only ssh routes can carry a cluster's API connection`);
  }
}

function checkUniqueNames(routes: RouteSpec[]): void {
  const byName = new Map<string, RouteSpec>();
  for (const r of routes) {
    const other = byName.get(r.name);
    if (other) throw new StartupError(`routes from ${other.origin} and ${r.origin} are both named "${r.name}"; name them in the config file`);
    byName.set(r.name, r);
  }
}
