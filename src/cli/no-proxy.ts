// NO_PROXY for the proxy variables we hand out (the ready lines, `connect`, `exec`). Once
// HTTPS_PROXY names our HTTP listener, every program that reads it sends its requests through us —
// kubectl and every client-go program too, whose API requests would then reach a proxy that
// refuses names no route claims (a kubectl in `exec -- ./integration-tests.sh` failed with
// "proxyconnect … 403"). So NO_PROXY lists, in order:
//  - this machine's loopback names (programs reaching local services);
//  - the API servers of the cluster routes, reached as before the variables were set;
//  - whatever NO_PROXY (or no_proxy) already said, so a user's own exceptions stay in force.

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

/** The NO_PROXY value for these API servers, keeping the entries `env` already has (each once). */
export function noProxyValue(apiServers: readonly string[], env: NodeJS.ProcessEnv = process.env): string {
  const inherited = [env.NO_PROXY, env.no_proxy].flatMap((v) => (v ?? '').split(',')).map((e) => e.trim());
  const entries = [...LOOPBACK_NO_PROXY, ...apiServers.map(hostOf), ...inherited].filter((e): e is string => !!e);
  return [...new Set(entries)].join(',');
}
