// The shell lines that point clients at a running proxy (the ready lines, `connect`, the live
// page) and NO_PROXY for every set of proxy variables we hand out (`exec` too). Once
// HTTPS_PROXY names our HTTP listener, every program that reads it sends its requests through us —
// kubectl and every client-go program too, whose API requests would then reach a proxy that
// refuses names no route claims (a kubectl in `exec -- ./integration-tests.sh` failed with
// "proxyconnect … 403"). So NO_PROXY lists, in order:
//  - this machine's loopback names (programs reaching local services);
//  - the API servers of the cluster routes, reached as before the variables were set;
//  - whatever NO_PROXY (or no_proxy) already said, so a user's own exceptions stay in force, but
//    `*` and the cluster-only entries (`.svc`, the cluster domain), which would bypass us for every name.
import { isIPv6, type AddressInfo } from 'node:net';
import { formatAddress, urlAuthority } from '../listeners/bound-address.js';
import { UNIX_FAMILY } from '../listeners/unix-socket.js';
import { encodeUrlPath } from '../core/url-path.js';
import { shellQuote } from '../core/escape.js';

export const LOOPBACK_NO_PROXY = ['localhost', '127.0.0.1', '::1'] as const;

/** The host of a server URL as NO_PROXY names it (no port, no IPv6 brackets); undefined when it is no URL. */
function hostOf(server: string): string | undefined {
  try {
    const host = new URL(server).hostname.toLowerCase();
    return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The NO_PROXY value for these API servers, keeping the entries `env` already has (each once) but
 * `*`: in a list Go still reads it as "no proxy for anything" (x/net/http/httpproxy), so a Go
 * program would bypass the proxy it was handed while curl and Python (which honour `*` only
 * alone) used it.
 */
export function noProxyValue(apiServers: readonly string[], env: NodeJS.ProcessEnv = process.env, clusterDomain = DEFAULT_CLUSTER_DOMAIN): string {
  const clusterOnly = [...new Set(['svc', DEFAULT_CLUSTER_DOMAIN, clusterDomain.toLowerCase().replace(/\.$/, '')])];
  const inherited = [env.NO_PROXY, env.no_proxy]
    .flatMap((v) => (v ?? '').split(','))
    .map((e) => e.trim())
    .filter((e) => e !== '*' && !namesClusterOnly(e, clusterOnly));
  const entries = [...LOOPBACK_NO_PROXY, ...apiServers.map(hostOf), ...inherited].filter((e): e is string => !!e).flatMap(bothIPv6Spellings);
  return [...new Set(entries)].join(',');
}

/**
 * An inherited entry for names that resolve only inside a cluster: `.svc`, `.cluster.local` (and a
 * custom cluster domain the proxy serves) and names under them, which Kubernetes guides put in
 * NO_PROXY to keep them off a corporate proxy. Kept, they sent past this proxy exactly the names it
 * serves (curl: "Could not resolve host").
 */
function namesClusterOnly(entry: string, clusterOnly: readonly string[]): boolean {
  const domain = entry
    .toLowerCase()
    .replace(/^\*?\./, '')
    .replace(/\.$/, '');
  return clusterOnly.some((d) => domain === d || domain.endsWith(`.${d}`));
}
const DEFAULT_CLUSTER_DOMAIN = 'cluster.local';

/**
 * An IPv6 address as an entry, bare and bracketed: curl and Go match `::1` only, Python's urllib
 * compares the URL's host with its brackets (`[::1]`); each ignores the other spelling.
 */
function bothIPv6Spellings(entry: string): string[] {
  return isIPv6(entry) ? [entry, `[${entry}]`] : [entry];
}

type Address = Pick<AddressInfo, 'address' | 'port'> & { family?: string };

/**
 * The variables the ready lines export, in their order: ALL_PROXY and all_proxy (the SOCKS
 * listener), then HTTP_PROXY, HTTPS_PROXY and their lower-case forms for an HTTP listener on TCP,
 * then NO_PROXY and no_proxy when any of those is set. Both cases, as `exec` sets them: curl reads
 * an inherited lower-case all_proxy before ALL_PROXY. With `authUser` and `password`, the URLs carry them: only
 * generated credentials, or a placeholder (cli/ready.ts readyLines, proxy/live.ts).
 */
export function exportedVariables(
  running: { socks?: Address; http?: Address; apiServers?: readonly string[]; clusterDomain?: string },
  authUser?: string,
  password?: string,
): Record<string, string> {
  const userinfo = authUser !== undefined && password !== undefined ? `${encodeURIComponent(authUser)}:${encodeURIComponent(password)}@` : '';
  const vars: Record<string, string> = {};
  // socks5h: the client hands us the name, so cluster DNS names resolve inside the cluster.
  if (running.socks) {
    vars.ALL_PROXY =
      running.socks.family === UNIX_FAMILY
        ? unixSocksUrl(running.socks.address, userinfo)
        : `socks5h://${userinfo}${urlAuthority(formatAddress(running.socks))}`;
    vars.all_proxy = vars.ALL_PROXY;
  }
  if (running.http && running.http.family !== UNIX_FAMILY) {
    const http = `http://${userinfo}${urlAuthority(formatAddress(running.http))}`;
    // curl (and others) ignore upper-case HTTP_PROXY for plain http:// URLs (httpoxy): lower case too.
    for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) vars[name] = http;
  }
  if (Object.keys(vars).length > 0) {
    vars.NO_PROXY = noProxyValue(running.apiServers ?? [], process.env, running.clusterDomain);
    vars.no_proxy = vars.NO_PROXY;
  }
  return vars;
}

const HTTP_PROXY_NAMES = ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'] as const;

/**
 * `export NAME=value` per variable, each value quoted when it holds anything a shell would read.
 * With ALL_PROXY and no HTTP listener, an `unset` of the HTTP(S)_PROXY variables too, as `exec`
 * removes them (cli/exec-env.ts): curl, Python and git prefer an inherited one (a corporate proxy)
 * to ALL_PROXY, so the shell's requests would go past this proxy.
 */
export function exportLines(vars: Record<string, string>): string[] {
  const lines = Object.entries(vars).map(([name, value]) => `export ${name}=${shellQuote(value)}`);
  if (vars.ALL_PROXY !== undefined && vars.HTTP_PROXY === undefined) lines.push(`unset ${HTTP_PROXY_NAMES.join(' ')}`);
  return lines;
}

/** curl's (≥ 7.84) form for a SOCKS proxy on a unix socket: socks5h://localhost/ABSOLUTE/PATH, the path percent-encoded (core/url-path.ts). */
export function unixSocksUrl(path: string, userinfo = ''): string {
  return `socks5h://${userinfo}localhost${path.startsWith('/') ? '' : '/'}${encodeUrlPath(path)}`;
}
