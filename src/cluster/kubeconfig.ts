import { existsSync } from 'node:fs';
import { NotRegularFileError } from '../core/regular-file.js';
import path from 'node:path';
// Not the package index (start-up time and the daemon's memory): client-node-config.ts says how.
import { KubeConfig } from './client-node-config.js';
import { StartupError, errorMessage } from '../core/errors.js';
import { OidcTokenSource } from './oidc.js';
import { OIDC_STORE_EXTENSION, OidcTokenStore } from './oidc-store.js';
import { TokenFileSource, withTokenSource } from './token-source.js';
import { addExecInfo } from './exec-info.js';
import { allowPlainHttp } from './plain-http.js';
import { IN_CLUSTER, inClusterConfig } from './in-cluster.js';
import { kubeconfigFiles, mergedKubeconfig, type MergedKubeConfig } from './kubeconfig-files.js';
import { runExecPluginsWithoutStdin } from './exec-credential.js';
import { impersonationOf, withImpersonation, type Impersonation } from './impersonation.js';
import { redact } from './egress-proxy.js';
import { directoryNamed, unreadableFile } from './tls-material.js';
import { checkClientKey, checkDataBesideFile, checkExec, checkImpersonatesUser, checkOneAuthMethod } from './kubeconfig-usable.js';

const NO_KUBECONFIG = 'no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or create ~/.kube/config';

export interface LoadedKubeConfig {
  kc: KubeConfig;
  context: string;
  namespace: string;
  server: string;
  /** The user's `tokenFile`, absolute, when it has one (managed daemons keep reading it). */
  tokenFile?: string;
  /** Impersonation beyond `as` (client-node keeps only `as`), for managed daemons' kubeconfigs. */
  impersonation?: Impersonation;
  /** An `auth-provider: oidc` user's: the file its tokens are kept in (oidc-store.ts). */
  oidcStore?: string;
}

/**
 * Loads the kubeconfig the way kubectl does (--kubeconfig, else $KUBECONFIG, else ~/.kube/config)
 * through client-node, so every auth method it knows (tokens, client certs, exec plugins,
 * proxy-url) works unchanged; where client-node falls short of kubectl we fill in (OIDC refresh,
 * tokenFile, exec info, impersonation groups). Fails with a one-line StartupError instead of
 * falling back to client-node's silent "localhost:8080" default.
 */
export function loadKubeConfig(opts: { kubeconfig?: string; context?: string; namespace?: string }): LoadedKubeConfig {
  const kc = new KubeConfig();
  allowPlainHttp(kc);
  let rawUsers: MergedKubeConfig['rawUsers'] = new Map();
  let incomplete: MergedKubeConfig['incomplete'] = new Set();
  try {
    if (opts.kubeconfig && !existsSync(opts.kubeconfig)) throw new StartupError(`kubeconfig ${opts.kubeconfig} does not exist`);
    const envFiles = (process.env.KUBECONFIG ?? '').split(path.delimiter).filter(Boolean);
    const files = kubeconfigFiles(opts.kubeconfig);
    // Inside a pod, kubectl reads the in-cluster configuration also when KUBECONFIG names only
    // files that are not there (an image's default): outside one, that is a mistake to name.
    const inCluster = files.length === 0 ? inClusterConfig() : undefined;
    if (!opts.kubeconfig && process.env.KUBECONFIG && files.length === 0 && typeof inCluster !== 'object') {
      if (envFiles.length === 0) throw new StartupError(`KUBECONFIG="${process.env.KUBECONFIG}" names no file: set it to one, or unset it for ~/.kube/config`);
      throw new StartupError(`no kubeconfig file from KUBECONFIG exists (${envFiles.join(', ')})`);
    }
    if (files.length > 0) {
      const merged = mergedKubeconfig(files);
      kc.loadFromOptions(merged);
      rawUsers = merged.rawUsers;
      incomplete = merged.incomplete;
      // Files that exist but define nothing (an empty file): not "no kubeconfig found".
      if (merged.contexts.length === 0)
        throw new StartupError(
          `${files.length === 1 ? `kubeconfig ${files[0]} defines` : `the kubeconfig files (${files.join(', ')}) define`} no context: add one (kubectl config set-context) or use another kubeconfig`,
        );
    } else {
      // No file at all: inside a pod, the in-cluster configuration, as kubectl reads it.
      if (typeof inCluster === 'string') throw new StartupError(`${NO_KUBECONFIG}; ${inCluster}`);
      if (inCluster) {
        kc.loadFromOptions(inCluster.options);
        rawUsers = new Map([[IN_CLUSTER.user, { user: { tokenFile: inCluster.tokenFile }, file: inCluster.tokenFile }]]);
      } else kc.loadFromDefault(); // client-node's Windows (WSL) look-ups, or its fallback (refused below)
    }
  } catch (err) {
    if (err instanceof StartupError) throw err;
    if (err instanceof NotRegularFileError) throw new StartupError(`cannot load kubeconfig: ${err.message}`, { cause: err });
    throw new StartupError(`cannot load kubeconfig: ${errorMessage(err).split('\n')[0]}`, { cause: err });
  }
  if (kc.getContexts().length === 0 || isClientNodeFallback(kc)) {
    throw new StartupError(NO_KUBECONFIG);
  }
  const known = () =>
    kc
      .getContexts()
      .map((c) => c.name)
      .join(', ');
  const noCluster = (name: string) =>
    new StartupError(
      `context "${name}" names no cluster (kubectl would send its requests to localhost:8080): set one with kubectl config set-context ${name} --cluster=NAME`,
    );
  if (opts.context) {
    if (incomplete.has(`context ${opts.context}`)) throw noCluster(opts.context);
    if (!kc.getContextObject(opts.context)) throw new StartupError(`context "${opts.context}" not found in kubeconfig (known: ${known()})`);
    kc.setCurrentContext(opts.context);
  }
  const context = kc.getCurrentContext();
  const ctx = kc.getContextObject(context);
  // Which to pass, as for a context not found (a kubeconfig without any is refused above).
  if (!context) throw new StartupError(`the kubeconfig has no current context (known: ${known()}): pass --context or run kubectl config use-context`);
  // kubectl: "context was not found for specified context"; a stale current-context is not a missing one.
  if (!ctx && incomplete.has(`context ${context}`)) throw noCluster(context);
  if (!ctx)
    throw new StartupError(
      `the kubeconfig's current-context "${context}" names no context it defines (known: ${known()}): pass --context or run kubectl config use-context`,
    );
  const cluster = kc.getCurrentCluster();
  if (!cluster && incomplete.has(`cluster ${ctx.cluster}`))
    throw new StartupError(
      `context "${context}" names cluster "${ctx.cluster}", which has no server: set one with kubectl config set-cluster ${ctx.cluster} --server=URL`,
    );
  if (!cluster) throw new StartupError(`context "${context}" names cluster "${ctx.cluster}", which the kubeconfig does not define`);
  checkServer(cluster.server, cluster.name);
  checkInsecureWithCA(cluster);
  if (cluster.proxyUrl) checkProxyUrl(cluster.proxyUrl, cluster.name);
  if (!kc.getCurrentUser()) throw new StartupError(undefinedUser(context, ctx.user));
  checkDataBesideFile(cluster, kc.getCurrentUser()!);
  checkClientKey(kc.getCurrentUser()!);
  checkExec(kc.getCurrentUser()!);
  const namespace = opts.namespace || ctx.namespace || 'default';
  // Only the entries in use: each route keeps its KubeConfig, and 200 routes of a 2000-context
  // kubeconfig held 200 copies of all of it (800 MB).
  kc.loadFromOptions({ clusters: [cluster], users: [kc.getCurrentUser()!], contexts: [ctx], currentContext: context });
  const directory = directoryNamed(kc, tokenFileOf(rawUsers.get(ctx.user)));
  if (directory) throw new StartupError(`context "${context}": ${directory}`);
  try {
    addExecInfo(kc); // reads the CA file for provideClusterInfo
  } catch (err) {
    throw new StartupError(`context "${context}": ${unreadableFile(kc, err) ?? errorMessage(err)}`, { cause: err });
  }
  runExecPluginsWithoutStdin(kc);
  // What client-node drops from the user entry (tokenFile, as-groups, …) we read from the file.
  const raw = rawUsers.get(ctx.user);
  checkOneAuthMethod(kc.getCurrentUser()!, tokenFileOf(raw));
  checkImpersonatesUser(ctx.user, raw?.user);
  const impersonation = impersonationOf(raw?.user);
  const provider = kc.getCurrentUser()!.authProvider;
  const oidcStore = provider?.name === 'oidc' ? oidcStoreOf(raw) : undefined;
  const token = typeof raw?.user.token === 'string' && raw.user.token ? raw.user.token : undefined;
  // A token or tokenFile beside an auth-provider is what kubectl sends (its bearer header is set
  // first; the provider's round tripper leaves a request that has one alone).
  const staticToken = !!(token || tokenFileOf(raw));
  const oidc =
    provider?.name === 'oidc' && provider.config && !staticToken
      ? new OidcTokenSource(provider.config as Record<string, string>, undefined, oidcStore ? new OidcTokenStore(oidcStore, ctx.user) : undefined)
      : undefined;
  const tokenFile = oidc ? undefined : tokenFileOf(raw);
  const source =
    oidc ??
    (tokenFile ? new TokenFileSource(tokenFile, undefined, token) : provider?.name === 'oidc' && token ? { token: () => Promise.resolve(token) } : undefined);
  const credentialed = source ? withTokenSource(kc, source) : kc;
  return {
    kc: withImpersonation(credentialed, impersonation),
    context,
    namespace,
    server: redactedServer(cluster.server),
    tokenFile,
    impersonation,
    ...(oidcStore ? { oidcStore } : {}),
  };
}

/**
 * The file an oidc user's tokens are kept in: the one that defines the user, or — in a managed
 * daemon's transient kubeconfig — the user's own file, which connect names in an extension.
 */
function oidcStoreOf(raw: { user: Record<string, unknown>; file: string } | undefined): string | undefined {
  if (!raw) return undefined;
  const extensions = Array.isArray(raw.user.extensions) ? (raw.user.extensions as Array<{ name?: unknown; extension?: Record<string, unknown> }>) : [];
  const named = extensions.find((e) => e?.name === OIDC_STORE_EXTENSION)?.extension?.file;
  return typeof named === 'string' && named ? named : path.resolve(raw.file);
}

/**
 * client-node drops a user's `tokenFile` (it knows only a non-standard `token-file`), so we take
 * it from the file ourselves: absolute, or relative to the kubeconfig that names it (client-go
 * resolves paths that way). `token-file` is taken too, to read it the way client-go would.
 */
function tokenFileOf(raw: { user: Record<string, unknown>; file: string } | undefined): string | undefined {
  const value = raw?.user.tokenFile ?? raw?.user['token-file'];
  return raw && typeof value === 'string' && value ? path.resolve(path.dirname(raw.file), value) : undefined;
}

/**
 * The server as messages, logs, `status` and state.json show it: a password in the URL
 * (`https://admin:PASSWORD@host`, sent as Basic credentials) written `***`, as kubectl does.
 * The connection itself reads the kubeconfig, not this.
 */
export function redactedServer(server: string): string {
  let password = '';
  try {
    password = new URL(server).password;
  } catch {
    /* checkServer has refused it */
  }
  return password ? server.replace(/^([^:/?#]+:\/\/[^/?#@]*?:)[^/?#]*@/, '$1***@') : server;
}

/**
 * A server written without its scheme ("10.0.0.1:6443") crashed the start with a bare "TypeError:
 * Invalid URL" (kubectl takes it as http:// and is answered "Client sent an HTTP request to an
 * HTTPS server"): say which cluster, and how to write it.
 */
function checkServer(server: string, cluster: string): void {
  let scheme: string | undefined;
  try {
    scheme = new URL(server).protocol;
  } catch {
    /* no scheme, or not a URL at all */
  }
  if (scheme === 'https:' || scheme === 'http:') return;
  // "admin:PASSWORD@host:6443" parses as the scheme "admin:": its password must not reach stderr.
  const shown = server.replace(/^((?:[a-z][\w+.-]*:\/\/)?[^:/?#@]*:)[^/?#@]*@/i, '$1***@');
  throw new StartupError(
    `cluster "${cluster}" has server "${shown}", which is not an https:// (or http://) URL: write it whole, e.g. https://${shown.replace(/^[a-z][\w+.-]*:\/\//i, '')}`,
  );
}

/**
 * A cluster that asks for no TLS verification and names a CA: client-go refuses the pair
 * (transport.TLSConfigFor), and so does kubectl; Node would skip the check and drop the CA, so
 * the user who added a CA would get none of the verification they think they have.
 */
function checkInsecureWithCA(cluster: { name: string; skipTLSVerify?: boolean; caFile?: string; caData?: string }): void {
  if (!cluster.skipTLSVerify || !(cluster.caFile || cluster.caData)) return;
  throw new StartupError(
    `cluster "${cluster.name}" sets insecure-skip-tls-verify and a certificate-authority: kubectl refuses that pair too (specifying a root certificates file with the insecure flag is not allowed); remove insecure-skip-tls-verify`,
  );
}

/**
 * kubectl refuses a proxy-url that is not http, https or socks5 (client-go clientcmd
 * validation), naming it; client-node dialled something anyway ("ftp://h:1" went to h:1 as an HTTP
 * proxy), which then read as "cannot reach the API server". socks5h, which kubectl spells socks5, passes.
 */
function checkProxyUrl(proxyUrl: string, cluster: string): void {
  let scheme: string;
  try {
    scheme = new URL(proxyUrl).protocol.replace(/:$/, '');
  } catch {
    throw new StartupError(`invalid 'proxy-url' "${redact(proxyUrl)}" for cluster "${cluster}": not a URL`);
  }
  if (!['http', 'https', 'socks5', 'socks5h'].includes(scheme))
    throw new StartupError(
      `invalid 'proxy-url' "${redact(proxyUrl)}" for cluster "${cluster}": unsupported scheme "${scheme}", must be http, https, or socks5`,
    );
}

/** A context's user the kubeconfig lacks, or none named at all (client-node insists on a cluster only). */
function undefinedUser(context: string, name: string | undefined): string {
  if (!name) return `context "${context}" names no user: set one with kubectl config set-context ${context} --user=NAME`;
  return `context "${context}" names user "${name}", which the kubeconfig does not define`;
}

/** client-node invents a "loaded-context" at http://localhost:8080 when it finds nothing at all. */
function isClientNodeFallback(kc: KubeConfig): boolean {
  const cluster = kc.getCurrentCluster();
  return kc.getCurrentContext() === 'loaded-context' && cluster?.server === 'http://localhost:8080';
}
