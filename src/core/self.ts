// How this program starts itself again (the managed daemon, a service unit): the single
// executable alone (Node SEA, `npm run package`), or node with the package's bin script.
import { existsSync } from 'node:fs';
import path from 'node:path';
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

/**
 * The script node runs: this package's bin script (dist/src/core → ../../../bin) for the npm
 * install; the bundle file itself when running as the bundle (scripts/package.mjs defines
 * PROXYOUT_BUNDLE there, and import.meta.url is the bundle's own URL).
 */
export function binScriptPath(): string {
  if (process.env.PROXYOUT_BUNDLE === '1') {
    // The npm package: dist/pkg/kubectl-proxyout.cjs beside ../../bin/kubectl-proxyout, which
    // loads the bundle with its compiled code cached (a faster daemon start). A bundle on its own
    // runs itself.
    const bin = fileURLToPath(new URL('../../bin/kubectl-proxyout', import.meta.url));
    return existsSync(bin) ? bin : fileURLToPath(import.meta.url);
  }
  return fileURLToPath(new URL('../../../bin/kubectl-proxyout', import.meta.url));
}

/** How this process runs: the single executable, or node (execPath) with the bin script. */
export interface SelfProgram {
  sea: boolean;
  execPath: string;
  binScript: string;
}

export function selfProgram(sea: boolean = isSingleExecutable()): SelfProgram {
  return { sea, execPath: process.execPath, binScript: binScriptPath() };
}

/** The file name that stands for us on the daemon's command line: the (perhaps renamed) single executable, or the bin script. */
export function selfProgramName(sea: boolean = isSingleExecutable()): string {
  return path.basename(sea ? process.execPath : binScriptPath());
}

/** Executable and leading arguments that run this CLI: [binary] or [node, bin script]. */
export function selfInvocation(sea: boolean = isSingleExecutable()): { command: string; args: string[] } {
  return sea ? { command: process.execPath, args: [] } : { command: process.execPath, args: [binScriptPath()] };
}

/**
 * The working directory, or undefined when it has been removed (process.cwd() throws ENOENT):
 * a process started without a cwd then inherits ours as it is, as kubectl's plugins would.
 */
export function workingDirectory(): string | undefined {
  try {
    return process.cwd();
  } catch {
    return undefined;
  }
}
