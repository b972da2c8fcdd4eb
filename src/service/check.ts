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

/** Throws a one-line StartupError when the proxy would refuse to start with these flags. */
export function checkServiceFlags(f: ServiceFlags): void {
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
}
