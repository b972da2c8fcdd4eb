// How this program starts itself again (the managed daemon, a service unit): the single
// executable alone (Node SEA, `npm run package`), or node with the package's bin script.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** True inside a Node single executable application (node:sea, Node ≥ 20.12). */
export function isSingleExecutable(): boolean {
  try {
    const sea = createRequire(import.meta.url)('node:sea') as { isSea(): boolean };
    return sea.isSea();
  } catch {
    return false;
  }
}

/** This package's bin script (dist/src/core → ../../../bin), for the npm install. */
export function binScriptPath(): string {
  return fileURLToPath(new URL('../../../bin/kubectl-proxyout', import.meta.url));
}

/** Executable and leading arguments that run this CLI: [binary] or [node, bin script]. */
export function selfInvocation(sea: boolean = isSingleExecutable()): { command: string; args: string[] } {
  return sea ? { command: process.execPath, args: [] } : { command: process.execPath, args: [binScriptPath()] };
}
