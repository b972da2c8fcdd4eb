// The routing table of a managed daemon. `connect` and `reload` resolve it on the user's side
// (config file, --context…, the user's kubeconfig) and hand the daemon the result: the table
// itself and a private single-context kubeconfig per cluster and konnectivity route, so the daemon never reads
// the user's kubeconfig or config file (what it serves is exactly what was checked).
import path from 'node:path';
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { loadKubeConfig, type LoadedKubeConfig } from '../cluster/kubeconfig.js';
import { routingTableFor } from '../proxy/proxy.js';
import type { ProxyOptions } from '../proxy/options.js';
import type { RoutingTable } from '../routing/table-spec.js';
import type { ClusterRouteSpec, KonnectivityRouteSpec } from '../routes/spec.js';
import type { StateLayout } from '../state/paths.js';
import { writeTransientKubeConfig } from '../state/kubeconfig.js';
import { connectionId, type CredentialIdentity } from './store.js';
import { kubeconfigFiles } from '../cluster/kubeconfig-files.js';

export interface ManagedTable {
  table: RoutingTable;
  /** Each cluster route with its loaded context; the default route first. */
  clusters: Array<{ spec: ClusterRouteSpec; kube: LoadedKubeConfig }>;
  /** Each konnectivity route with its guest cluster's loaded context (it watches that API too). */
  guests: Array<{ spec: KonnectivityRouteSpec; kube: LoadedKubeConfig }>;
  /** The default cluster route's context (what `status` shows as the proxy's context); none for a table without a cluster route. */
  primary: LoadedKubeConfig | undefined;
}

/** Resolves the table and loads every cluster route's context (a StartupError names what is wrong). */
export function resolveManagedTable(
  options: Pick<ProxyOptions, 'kubeconfig' | 'contexts' | 'currentContext' | 'config' | 'defaultConfig' | 'direct' | 'clusterDomain' | 'extraCA'> & {
    namespace?: string;
  },
): ManagedTable {
  const table = routingTableFor({ ...options } as ProxyOptions);
  const load = (spec: ClusterRouteSpec | KonnectivityRouteSpec) =>
    loadKubeConfig({
      kubeconfig: options.kubeconfig,
      context: spec.context,
      namespace: spec.name === table.defaultRoute ? options.namespace : undefined,
    });
  const clusters = table.routes
    .filter((r): r is ClusterRouteSpec => r.kind === 'cluster')
    .map((spec) => ({ spec, kube: load(spec) }))
    .sort((a, b) => Number(b.spec.name === table.defaultRoute) - Number(a.spec.name === table.defaultRoute));
  const guests = table.routes.filter((r): r is KonnectivityRouteSpec => r.kind === 'konnectivity').map((spec) => ({ spec, kube: load(spec) }));
  return { table, clusters, guests, primary: clusters[0]?.kube };
}

/**
 * The connection ID: for one cluster and nothing else, the same as ever (server, context,
 * namespace); for a table, a hash of what it serves.
 */
export function managedId(m: ManagedTable): string {
  if (m.table.routes.length === 1 && m.primary) return connectionId(m.primary.server, m.primary.context, m.primary.namespace);
  const what = m.table.routes.map((r) => JSON.stringify({ ...r, origin: undefined }));
  const servers = m.clusters.map((c) => `${c.spec.name}=${c.kube.server}/${c.kube.namespace}`);
  return createHash('sha256')
    .update([...what, ...servers, m.table.defaultRoute ?? '', m.table.directRoute ?? ''].join('\n'))
    .digest('hex')
    .slice(0, 8);
}

/** Writes the private kubeconfig of each cluster and konnectivity route; returns route name → file. */
export function writeRouteKubeconfigs(l: StateLayout, id: string, m: ManagedTable): Record<string, string> {
  const files: Record<string, string> = {};
  for (const { spec, kube } of [...m.clusters, ...m.guests]) {
    const file = spec.name === m.table.defaultRoute ? l.kubeconfigFile(id) : l.routeKubeconfigFile(id, spec.name);
    writeTransientKubeConfig(file, kube.kc, kube.namespace, kube.tokenFile, kube.impersonation, kube.oidcStore);
    files[spec.name] = file;
  }
  return files;
}

/** Route name → transient kubeconfig, as the daemon finds them for a table. */
export function routeKubeconfigsFor(l: StateLayout, id: string, table: RoutingTable): Record<string, string> {
  const files: Record<string, string> = {};
  for (const r of table.routes)
    if (r.kind === 'cluster' || r.kind === 'konnectivity')
      files[r.name] = r.name === table.defaultRoute ? l.kubeconfigFile(id) : l.routeKubeconfigFile(id, r.name);
  return files;
}

/** Removes the routes' transient kubeconfigs other than `keep`: they hold credentials no route of the daemon uses any more. */
export function removeRouteKubeconfigsExcept(l: StateLayout, id: string, keep: Iterable<string>): void {
  const kept = new Set(keep);
  for (const file of routeKubeconfigFiles(l, id)) if (!kept.has(file)) rmSync(file, { force: true });
}

/** The routes' transient kubeconfigs in a proxy's directory now (the default route's excepted). */
export function routeKubeconfigFiles(l: StateLayout, id: string): string[] {
  const dir = path.dirname(l.kubeconfigFile(id));
  const prefix = path.basename(l.routeKubeconfigFile(id, ''));
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.filter((n) => n.startsWith(prefix) && n.length > prefix.length).map((n) => path.join(dir, n));
}

/** The table `reload` hands the daemon (0600, beside its kubeconfigs). */
export function writeTableFile(l: StateLayout, id: string, table: RoutingTable): void {
  writeFileSync(l.tableFile(id), `${JSON.stringify(table)}\n`, { mode: 0o600 });
}

export const absolute = (p: string | undefined) => (p === undefined ? undefined : path.resolve(p));

/** A path list ($KUBECONFIG) with each entry absolute; empty entries kept, as they were. */
export const absoluteList = (list: string | undefined) =>
  (list ?? '')
    .split(path.delimiter)
    .map((p) => p && path.resolve(p))
    .join(path.delimiter);

/**
 * $KUBECONFIG for `reload` to set: each file absolute; unset, ~/.kube/config of this shell's HOME
 * (sudo, su or cron may give the reloading shell another), or '' when there is none.
 */
export function recordedKubeconfigEnv(env: NodeJS.ProcessEnv = process.env): string {
  return env.KUBECONFIG ? absoluteList(env.KUBECONFIG) : kubeconfigFiles(undefined, env).join(path.delimiter);
}

/**
 * Who a context's requests are made as, without secrets: the user entry's name, the kubeconfig
 * files, and the exec plugin, auth provider and impersonation it names. Tokens and certificates
 * renew under one identity (`oc login`, an OIDC refresh) and are left out; two kubeconfigs with one
 * context name and server (`aws eks update-kubeconfig` with two roles) differ here.
 */
export function credentialIdentity(kube: LoadedKubeConfig, kubeconfig: string | undefined): CredentialIdentity {
  const user = kube.kc.getCurrentUser();
  const files = kubeconfigFiles(kubeconfig).map((f) => path.resolve(f));
  const picks = {
    user: user?.name ?? '',
    files,
    exec: user?.exec
      ? { command: user.exec.command, args: user.exec.args ?? [], env: ((user.exec.env ?? []) as Array<{ name?: string }>).map((e) => e.name) }
      : undefined,
    authProvider: user?.authProvider?.name,
    as: user?.impersonateUser,
    impersonation: kube.impersonation,
  };
  const key = createHash('sha256').update(JSON.stringify(picks)).digest('hex').slice(0, 16);
  return { user: picks.user, files, key };
}
