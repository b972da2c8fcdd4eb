// Which executable a service runs. What this process was started as is often a versioned file —
// krew's ~/.krew/store/proxyout/v0.1.0/kubectl-proxyout, Homebrew's Cellar/…/0.1.0/…, a node under
// ~/.nvm/versions/node/v20.11.0 — that the next upgrade removes, after which the service could
// never start again. The name the user reaches us by is stable: an entry `kubectl-proxyout` on
// the installing shell's PATH that resolves to our own file (krew's ~/.krew/bin link, Homebrew's
// bin link, npm's global bin link). The service runs that entry when there is one.
import { accessSync, constants, openSync, readSync, closeSync, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { findExecutable } from '../doctor/exec-path.js';
import type { SelfProgram } from '../core/self.js';

export const EXECUTABLE_NAME = 'kubectl-proxyout';

export interface ServiceExecutable {
  command: string;
  args: string[];
  /** The PATH entry used (undefined: none was found, the service runs this process's own files). */
  stableName?: string;
  /** A file of the invocation that lies in a versioned directory: an upgrade removes it. */
  versioned?: string;
}

/**
 * The command line that starts this CLI from a service whose PATH is `unitPath` (the installing
 * shell's, kept in the unit) and whose working directory is `workingDirectory`.
 */
export function serviceExecutable(self: SelfProgram, unitPath: string | undefined, workingDirectory: string): ServiceExecutable {
  const own = realpathOrUndefined(self.sea ? self.execPath : self.binScript);
  const entry = own === undefined ? undefined : stableEntry(own, unitPath);
  // A PATH entry can be in a versioned directory too: npm's global link under nvm
  // (~/.nvm/versions/node/v20.11.0/bin/kubectl-proxyout), gone with that node version.
  if (entry !== undefined && self.sea) return withVersioned({ command: entry, args: [], stableName: entry });
  if (entry !== undefined) {
    // npm's link is a script: `#!/usr/bin/env node` finds node on the PATH the unit keeps, as
    // the user's shell does (that node may be a versioned one too). Without a node there, our own
    // node runs it.
    const node = runsThroughEnvNode(entry) ? nodeOnPath(unitPath, workingDirectory) : undefined;
    if (node !== undefined) return withVersioned({ command: entry, args: [], stableName: entry }, node);
    return withVersioned({ command: self.execPath, args: [entry], stableName: entry });
  }
  return withVersioned(self.sea ? { command: self.execPath, args: [] } : { command: self.execPath, args: [self.binScript] });
}

/** The first absolute PATH entry named kubectl-proxyout that is our own file (relative entries depend on the shell's directory). */
function stableEntry(own: string, unitPath: string | undefined): string | undefined {
  for (const dir of (unitPath ?? '').split(path.delimiter)) {
    if (!path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, EXECUTABLE_NAME);
    if (isExecutableFile(candidate) && realpathOrUndefined(candidate) === own) return candidate;
  }
  return undefined;
}

/** Whether the script starts with `#!/usr/bin/env node` (this package's bin script does). */
function runsThroughEnvNode(file: string): boolean {
  const buf = Buffer.alloc(64);
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const n = readSync(fd, buf, 0, buf.length, 0);
    return /^#!\s*\/usr\/bin\/env\s+node\s*$/.test(buf.subarray(0, n).toString('latin1').split('\n', 1)[0]!);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** The node `env node` finds under the unit's PATH (relative entries count from the working directory, as env reads them). */
function nodeOnPath(unitPath: string | undefined, workingDirectory: string): string | undefined {
  if (unitPath === undefined) return undefined;
  const absolute = unitPath
    .split(path.delimiter)
    .map((dir) => path.resolve(workingDirectory, dir === '' ? '.' : dir))
    .join(path.delimiter);
  return findExecutable('node', { PATH: absolute });
}

/** What the service runs, and a warning when an upgrade will remove it. */
export function executableLines(e: ServiceExecutable): string[] {
  const how = !e.stableName
    ? `no ${EXECUTABLE_NAME} on your PATH is this program`
    : e.versioned
      ? `${e.stableName} is on your PATH`
      : `${e.stableName} is on your PATH: upgrades keep it`;
  const lines = [`runs: ${[e.command, ...e.args].join(' ')} (${how})`];
  if (e.versioned) {
    lines.push(
      `warning: ${e.versioned} is in a versioned directory (${versionedDirectory(e.versioned)}): an upgrade (kubectl krew upgrade, brew upgrade, a new node) ` +
        `removes it and the service then stops; put ${EXECUTABLE_NAME} on your PATH (krew: ~/.krew/bin) and run service-install again`,
    );
  }
  return lines;
}

/** `e`, with the first of its files (and `others`, such as the node env finds) that an upgrade removes. */
function withVersioned(e: ServiceExecutable, ...others: string[]): ServiceExecutable {
  const versioned = [e.command, ...e.args.slice(0, 1), ...others].find((file) => versionedDirectory(file) !== undefined);
  return versioned === undefined ? e : { ...e, versioned };
}

/** The first directory of the path named like a version ("v0.1.0", "20.11.0"), else undefined. */
export function versionedDirectory(file: string): string | undefined {
  return path
    .dirname(file)
    .split(/[\\/]/)
    .find((segment) => /^v?\d+\.\d+(\.\d+)?([-+_][0-9A-Za-z.+_-]*)?$/.test(segment));
}

function realpathOrUndefined(file: string): string | undefined {
  try {
    return realpathSync(file);
  } catch {
    return undefined;
  }
}

function isExecutableFile(file: string): boolean {
  try {
    if (!statSync(file).isFile()) return false;
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
