// kubectl reads the kubeconfig at each run, so a user who logs in again is served at once: `oc
// login` rewrites the user's token, other tools write a new embedded certificate. The proxy read
// the kubeconfig at start. A cluster route whose credentials the API server refuses is made anew
// (as a reload makes a route whose kubeconfig entries changed) once the kubeconfig holds other
// entries for its context: looked at every few seconds while refused, never otherwise.
import type { Logger } from '../core/log.js';
import { errorMessage } from '../core/errors.js';
import { contextFingerprint } from '../cluster/kubeconfig-files.js';
import type { BuiltTable } from './build-table.js';

const CHECK_MS = 3_000;

/** Starts the checks; `reload` makes the table in force anew from the kubeconfig as it is now. */
export function reloadOnNewCredentials(current: () => BuiltTable, reload: () => Promise<void>, log: Logger, checkMs = CHECK_MS): { stop(): void } {
  let busy = false;
  // What each route was last made anew from: entries that failed too are not tried again until edited.
  const tried = new Map<string, string>();
  const timer = setInterval(() => {
    if (busy) return;
    const built = current();
    const renewed = built.table.routes.filter((spec) => {
      if (!('context' in spec) || !built.routes.get(spec.name)?.guest?.credentialsRefused()) return false;
      const file = built.settings.routeKubeconfigs?.[spec.name] ?? built.settings.kubeconfig;
      const now = contextFingerprint(file, spec.context);
      if (now === built.kubeconfigs.get(spec.name) || now === tried.get(spec.name)) return false;
      tried.set(spec.name, now);
      return true;
    });
    if (renewed.length === 0) return;
    busy = true;
    log.info({ routes: renewed.map((r) => r.name) }, 'the API server refuses the credentials and the kubeconfig has new ones: making the route anew with them');
    reload()
      .catch((err: unknown) => log.warn({ error: errorMessage(err) }, 'the route could not be made anew with the new credentials; it keeps trying'))
      .finally(() => (busy = false));
  }, checkMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
