// The proxy variables `exec` gives its command: what `export` lines would set, for one process.
// ALL_PROXY (curl, git, most SDKs) prefers the SOCKS listener (socks5h: names resolve in the
// cluster); HTTP(S)_PROXY only for an HTTP listener on TCP (no variable can name a unix socket for
// HTTP). Both cases of each name: curl ignores upper-case HTTP_PROXY (httpoxy), Go and Python read
// either. NO_PROXY keeps this machine's own loopback services and the routes' API servers off the
// proxy, and the command's own NO_PROXY entries (proxy/client-env.ts).
import type { AddressInfo } from 'node:net';
import { formatAddress, urlAuthority } from '../listeners/bound-address.js';
import { noProxyValue, unixSocksUrl } from '../proxy/client-env.js';
import { UNIX_FAMILY } from '../listeners/unix-socket.js';

type Address = Pick<AddressInfo, 'address' | 'port'> & { family?: string };

const HTTP_PROXY_NAMES = ['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy'] as const;

/** The variables to set for CMD; `undefined` marks one to remove from the environment it inherits. */
export type ProxyEnvironment = Record<string, string | undefined>;

export function proxyEnvironment(
  listeners: { socks?: Address; http?: Address },
  auth: { username: string; password: string } | undefined,
  apiServers: readonly string[],
  clusterDomain?: string,
): ProxyEnvironment {
  const userinfo = auth ? `${encodeURIComponent(auth.username)}:${encodeURIComponent(auth.password)}@` : '';
  const env: ProxyEnvironment = {};
  const httpUrl = listeners.http && listeners.http.family !== UNIX_FAMILY ? `http://${userinfo}${urlAuthority(formatAddress(listeners.http))}` : undefined;
  const socksUrl = listeners.socks
    ? listeners.socks.family === UNIX_FAMILY
      ? unixSocksUrl(listeners.socks.address, userinfo)
      : `socks5h://${userinfo}${urlAuthority(formatAddress(listeners.socks))}`
    : undefined;
  const all = socksUrl ?? httpUrl;
  if (all) env.ALL_PROXY = env.all_proxy = all;
  // Without an HTTP listener an inherited HTTP(S)_PROXY (a corporate proxy) is removed: curl,
  // Python and git prefer it to ALL_PROXY, so CMD's requests would bypass this proxy.
  for (const name of HTTP_PROXY_NAMES) env[name] = httpUrl;
  env.NO_PROXY = env.no_proxy = noProxyValue(apiServers, process.env, clusterDomain);
  return env;
}

/** Whether a proxy variable can name one of these listeners: SOCKS (TCP or unix) or HTTP on TCP. */
export function variablesCanName(listeners: { socks?: Address; http?: Address }): boolean {
  return listeners.socks !== undefined || httpOnTcp(listeners);
}

/**
 * Whether HTTP(S)_PROXY can name one of these listeners: what Go's net/http, Python and Node
 * clients read (none of them reads ALL_PROXY, or takes socks5h:// without an extra library).
 */
export function httpOnTcp(listeners: { http?: Address }): boolean {
  return listeners.http !== undefined && listeners.http.family !== UNIX_FAMILY;
}

/** `base` with the proxy variables applied: set, or removed where `vars` says undefined. */
export function withProxyEnvironment(base: NodeJS.ProcessEnv, vars: ProxyEnvironment): NodeJS.ProcessEnv {
  const env = { ...base };
  for (const [name, value] of Object.entries(vars)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}
