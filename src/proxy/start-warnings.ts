// What the proxy warns of once it has started: mistakes that do not stop it but would make
// clients fail later with no word at the start (a namespace that does not exist). Each warning
// names the flag or value involved; `connect` prints them as the foreground proxy does.
import { isIP } from 'node:net';
import type { Route } from '../routes/route.js';
import type { Router } from '../routing/router.js';
import type { RoutingTable } from '../routing/table-spec.js';
import type { ForwardSpec } from '../core/address.js';
import { escapeControls, shellQuote } from '../core/escape.js';

/**
 * The default cluster route's namespace does not exist (a typo in -n, or a context's stale
 * namespace): short names would each fail later, saying so only then. `given`: -n, if given; a
 * table with no route to take it makes -n a no-op, said too.
 */
export async function namespaceWarning(route: Route | undefined, given: string | undefined, table: RoutingTable): Promise<string | undefined> {
  const flag = given !== undefined;
  // Only the default cluster route takes -n: a table of other routes has none to give it.
  if (flag && table.defaultRoute === undefined)
    return `-n ${escapeControls(given)} has no effect: no route serves cluster names (routes: ${table.routes.map((r) => `${r.name} (${r.kind})`).join(', ')})`;
  const guest = route?.guest;
  if (!guest?.namespaceFound) return undefined;
  const namespace = guest.defaultNamespace;
  if ((await guest.namespaceFound(namespace).catch(() => undefined)) !== false) return undefined;
  const context = escapeControls(guest.context);
  const what = flag
    ? `-n ${escapeControls(namespace)}: there is no namespace "${escapeControls(namespace)}" in context ${context}`
    : `the namespace of context ${context}, "${escapeControls(namespace)}", does not exist`;
  return `${what}, so short names (SERVICE, SERVICE:PORT) fail; SERVICE.NAMESPACE names work (kubectl get namespaces --context ${shellQuote(guest.context)} lists them)`;
}

/**
 * Port mappings whose target no route serves, or names a Service, namespace or port the cluster
 * does not have: each would fail every connection, said only in the log then. An IP target is
 * left out: a Pod IP is looked up only when a connection asks for it.
 */
export async function forwardWarnings(router: Router, forwards: ReadonlyArray<ForwardSpec & { flag: string }>): Promise<string[]> {
  const found = await Promise.all(
    forwards.map(async (f) => {
      if (isIP(f.target.host)) return undefined;
      const decision = router.decide({ destination: f.target });
      if (!decision.claimed) return `${f.flag} ${f.text}: ${decision.message}`;
      const checking = router.current.routes.get(decision.route.name)?.check?.(decision, f.target.port);
      // A check that waits on the API server (a namespace watched on demand) must not hold the start up.
      const problem = checking
        ? await withinMs(
            checking.catch(() => undefined),
            CHECK_MS,
          )
        : undefined;
      return problem === undefined ? undefined : `${f.flag} ${f.text}: ${problem}`;
    }),
  );
  return found.filter((w): w is string => w !== undefined);
}

/** How long the checks of the port mappings' targets may hold up the ready lines. */
const CHECK_MS = 5_000;

function withinMs<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
