// service-install refuses flags the service could never start with: a bad listen address, a
// missing or group-readable --proxy-auth-file, a kubeconfig or --context that does not load, a
// config file that does not parse, a bad --forward.
// They are checked by the proxy's own start-up checks (proxy/startup-checks.ts), so the message
// is the one the service would have logged on every start — before anything is written.
import { DEFAULTS } from '../proxy/options.js';
import { checkRouteFiles, planStart } from '../proxy/startup-checks.js';
import { resolveCredentials } from '../auth/credentials.js';
import { OFF } from '../cli/flags.js';
import { clusterDomainFrom } from '../cli/table-flags.js';
import type { ServiceFlags } from './spec.js';

/**
 * Throws a one-line StartupError when the proxy would refuse to start with these flags; returns
 * warnings about what the service would leave open to other local users.
 */
export function checkServiceFlags(f: ServiceFlags): string[] {
  // The unit carries no $KUBECTL_PROXYOUT_PROXY_AUTH: only the file gives the service credentials.
  const proxyAuth = resolveCredentials({ file: f['proxy-auth-file'] }, {});
  // As the foreground proxy reads the flags it is given (cli/flags.ts proxyOptionsFrom).
  const listenSocks = f['listen-socks'] ?? DEFAULTS.listenSocks;
  const plan = planStart({
    listenSocks: listenSocks === OFF ? undefined : listenSocks,
    listenHttp: f['listen-http'] === OFF ? undefined : f['listen-http'],
    kubeconfig: f.kubeconfig,
    contexts: f.context ?? [],
    config: f.config,
    direct: f.direct,
    extraCA: f['extra-ca'],
    clusterDomain: clusterDomainFrom(f['cluster-domain'] ?? DEFAULTS.clusterDomain),
    forwards: f.forward,
    proxyAuth,
  });
  checkRouteFiles(plan.table, f.kubeconfig);
  return openToLocalUsers(plan.listens, plan.forwards.length, proxyAuth !== undefined);
}

/**
 * A service runs all day, and any local user can connect to its loopback ports: connect generates
 * a password for that reason, but a service can only be given one (--proxy-auth-file), so say so.
 */
export function openToLocalUsers(listens: ReadonlyArray<{ flag: string }>, forwards: number, hasCredentials: boolean): string[] {
  const warnings: string[] = [];
  if (!hasCredentials && listens.length > 0)
    warnings.push(
      `${listens.map((l) => l.flag).join(' and ')} on TCP without --proxy-auth-file: every local user can use your cluster access through the service; ` +
        'add --proxy-auth-file FILE (chmod 600, user:password) or listen on unix sockets (unix:)',
    );
  if (forwards > 0) warnings.push('port mappings (--forward) cannot ask for a password: every local user can use them while the service runs');
  return warnings;
}
