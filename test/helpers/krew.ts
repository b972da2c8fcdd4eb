// A real krew (sigs.k8s.io/krew, built from the Go module proxy) for the distribution tests,
// cached outside the clone as the real-cluster binaries are: built on first use when Go is on
// PATH (a minute or two), at once afterwards. Without Go the krew test skips with the reason;
// with Go, a build that fails is a failure.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const KREW_VERSION = 'v0.4.3';

function cacheDir(): string {
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'kubectl-proxyout', 'krew', KREW_VERSION);
}

/** The krew binary, or a reason it cannot be had here (no Go). Throws when Go is there and the build fails. */
export function krewBinary(): { file: string } | { skip: string } {
  const file = path.join(cacheDir(), 'krew');
  if (existsSync(file)) return { file };
  if (spawnSync('go', ['version'], { stdio: 'ignore' }).error) return { skip: `go is not on PATH: cannot build krew ${KREW_VERSION}` };
  mkdirSync(cacheDir(), { recursive: true });
  const built = spawnSync('go', ['install', `sigs.k8s.io/krew/cmd/krew@${KREW_VERSION}`], {
    env: { ...process.env, GOBIN: cacheDir(), CGO_ENABLED: '0' },
    encoding: 'utf8',
    timeout: 600_000,
  });
  if (built.status !== 0 || !existsSync(file)) throw new Error(`building krew ${KREW_VERSION} failed: ${built.stderr || built.error}`);
  return { file };
}
