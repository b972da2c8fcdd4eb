// What the proxy warns of once it has started: mistakes that do not stop it but would make
// clients fail later with no word at the start (a namespace that does not exist). Each warning
// names the flag or value involved; `connect` prints them as the foreground proxy does.
import type { Route } from '../routes/route.js';
import { escapeControls, shellQuote } from '../core/escape.js';

/**
 * The default cluster route's namespace does not exist (a typo in -n, or a context's stale
 * namespace): short names would each fail later, saying so only then. `flag`: it came from -n.
 */
export async function namespaceWarning(route: Route | undefined, flag: boolean): Promise<string | undefined> {
  const guest = route?.guest;
  if (!guest?.namespaceFound) return undefined;
  const namespace = guest.defaultNamespace;
  if ((await guest.namespaceFound(namespace).catch(() => undefined)) !== false) return undefined;
  const context = escapeControls(guest.context);
  const given = flag
    ? `-n ${escapeControls(namespace)}: there is no namespace "${escapeControls(namespace)}" in context ${context}`
    : `the namespace of context ${context}, "${escapeControls(namespace)}", does not exist`;
  return `${given}, so short names (SERVICE, SERVICE:PORT) fail; SERVICE.NAMESPACE names work (kubectl get namespaces --context ${shellQuote(guest.context)} lists them)`;
}
