// kubectl reads the kubeconfig at each run, so a user who logs in again is served at once: `oc
// login` rewrites the user's token, other tools write a new embedded certificate. The proxy read
// the kubeconfig at start. A cluster route whose credentials the API server refuses is made anew
// (as a reload makes a route whose kubeconfig entries changed) once the kubeconfig holds other
// entries for its context: looked at every few seconds while refused, never otherwise. So is one
// whose API server it cannot reach, or that never started: a rotated CA or a server moved to
// another address is written there too (`gcloud … get-credentials`). A managed daemon runs from
// its own copy: its source is the user's kubeconfig, and renewing is a reload.
import type { Logger } from '../core/log.js';
import { errorMessage } from '../core/errors.js';
import { monotonicMs } from '../core/clock.js';
import { contextFingerprint } from '../cluster/kubeconfig-files.js';
import type { BuiltTable } from './build-table.js';
import type { RouteSpec } from '../routes/spec.js';

const CHECK_MS = 3_000;
/** How often the same entries are tried again for a server that cannot be reached (it may answer there later). */
const RETRY_UNREACHABLE_MS = 30_000;

/** Where a route's credentials come from, and how the table is made anew from them. */
export interface CredentialSource {
  /** The kubeconfig entries of the route's context as they are now (contextFingerprint). */
  now(spec: RouteSpec & { context: string }): string;
  /** Those the route in force was made from. */
  inForce(spec: RouteSpec & { context: string }): string | undefined;
  /** Makes the table anew from the kubeconfig as it is now. */
  renew(): Promise<void>;
}

/** A foreground proxy's source: the kubeconfig it runs from. */
export function ownKubeconfig(current: () => BuiltTable, reload: () => Promise<void>): CredentialSource {
  return {
    now: (spec) => {
      const settings = current().settings;
      return contextFingerprint(settings.routeKubeconfigs?.[spec.name] ?? settings.kubeconfig, spec.context);
    },
    inForce: (spec) => current().kubeconfigs.get(spec.name),
    renew: reload,
  };
}

/** Starts the checks of the routes in `current()`'s table against `source`. */
export function reloadOnNewCredentials(
  current: () => BuiltTable,
  source: CredentialSource,
  log: Logger,
  checkMs = CHECK_MS,
  retryMs = RETRY_UNREACHABLE_MS,
): { stop(): void } {
  let busy = false;
  // What each route was last made anew from, and when: refused credentials that failed too are not
  // tried again until edited; a server that cannot be reached is, every retryMs (the kubeconfig
  // may name its new address before the control plane answers there).
  const tried = new Map<string, { entries: string; at: number }>();
  const timer = setInterval(() => {
    if (busy) return;
    const built = current();
    const refused: string[] = [];
    const renewed = built.table.routes.filter((spec) => {
      const guest = built.routes.get(spec.name)?.guest;
      if (!('context' in spec) || !guest) return false;
      const credentials = guest.credentialsRefused();
      if (!credentials && !guest.apiUnreachable()) return false;
      const now = source.now(spec);
      const last = tried.get(spec.name);
      if (now === source.inForce(spec) || (last?.entries === now && (credentials || monotonicMs() - last.at < retryMs))) return false;
      tried.set(spec.name, { entries: now, at: monotonicMs() });
      if (credentials) refused.push(spec.name);
      return true;
    });
    if (renewed.length === 0) return;
    busy = true;
    const names = renewed.map((r) => r.name);
    if (refused.length)
      log.info({ routes: refused }, 'the API server refuses the credentials and the kubeconfig has new ones: making the route anew with them');
    if (refused.length < names.length) {
      const unreachable = names.filter((n) => !refused.includes(n));
      log.info(
        { routes: unreachable },
        'the route cannot reach its API server (or never started) and the kubeconfig has new entries for its context: making the route anew with them',
      );
    }
    source
      .renew()
      .catch((err: unknown) => log.warn({ error: errorMessage(err) }, "the route could not be made anew with the kubeconfig's new entries; it keeps trying"))
      .finally(() => (busy = false));
  }, checkMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
