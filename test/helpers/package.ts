// The artefacts of `npm run package` (dist/pkg), for the tests that run them. When they were not
// built those tests skip with a reason — except where PROXYOUT_REQUIRE_PACKAGE=1 (CI builds the
// package before the tests), where a missing artefact fails instead.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './proxy-process.js';

const GOOS: Record<string, string> = { linux: 'linux', darwin: 'darwin', win32: 'windows' };
const GOARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64' };

export const platformName = `kubectl-proxyout-${GOOS[process.platform] ?? process.platform}-${GOARCH[process.arch] ?? process.arch}`;
export const exeSuffix = process.platform === 'win32' ? '.exe' : '';
export const packagedBinary = path.join(repoRoot, 'dist', 'pkg', platformName + exeSuffix);
export const packagedArchive = path.join(repoRoot, 'dist', 'pkg', `${platformName}.tar.gz`);

/** false when the artefact is there; else the skip reason (or a throw under PROXYOUT_REQUIRE_PACKAGE=1). */
export function skipUnlessPackaged(file: string): false | string {
  if (existsSync(file)) return false;
  const reason = `${path.relative(repoRoot, file)} is not built: run \`npm run package\` first`;
  if (process.env.PROXYOUT_REQUIRE_PACKAGE === '1') throw new Error(reason);
  return reason;
}
