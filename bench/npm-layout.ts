// The npm package as `npm install -g` lays it out (bin/ beside dist/pkg/), in a temporary
// directory: what the benchmarks run as "the npm install". The bin script loads the bundle with
// V8's code cache (bin/kubectl-proxyout), kept in this layout's own cache directory and written by
// a first, unmeasured run.
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { binPath, repoRoot, startProxyProcess } from '../test/helpers/proxy-process.js';

export const bundlePath = path.join(repoRoot, 'dist', 'pkg', 'kubectl-proxyout.cjs');

export interface NpmLayout {
  /** [node, bin script] */
  command: string[];
  env: Record<string, string>;
  dispose(): void;
}

/** undefined when the bundle is not built (`npm run package`). */
export async function npmLayout(): Promise<NpmLayout | undefined> {
  if (!existsSync(bundlePath)) return undefined;
  const pkg = mkdtempSync(path.join(os.tmpdir(), 'proxyout-bench-npm-'));
  mkdirSync(path.join(pkg, 'bin'));
  mkdirSync(path.join(pkg, 'dist', 'pkg'), { recursive: true });
  copyFileSync(binPath, path.join(pkg, 'bin', 'kubectl-proxyout'));
  copyFileSync(path.join(path.dirname(binPath), 'package.json'), path.join(pkg, 'bin', 'package.json'));
  copyFileSync(bundlePath, path.join(pkg, 'dist', 'pkg', 'kubectl-proxyout.cjs'));
  writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: 'kubectl-proxyout', type: 'module' }));
  const command = [process.execPath, path.join(pkg, 'bin', 'kubectl-proxyout')];
  const env = { XDG_CACHE_HOME: path.join(pkg, 'cache') };
  const dispose = () => rmSync(pkg, { recursive: true, force: true });
  const warm = await new Promise<Error | null>((resolve) =>
    execFile(command[0]!, [command[1]!, '--help'], { env: { ...process.env, ...env } }, (err) => resolve(err)),
  );
  if (warm) {
    dispose();
    throw new Error(`the npm layout's first run (writing the code cache) failed: ${warm.message}`);
  }
  return { command, env, dispose };
}

let shared: Promise<NpmLayout | undefined> | undefined;

/**
 * The proxy the benchmarks measure: as npm installs it when the bundle is built (what users run;
 * `npm run bench` builds it), else the clone. One layout for the whole run, removed at exit.
 */
export async function startBenchProxy(
  args: string[],
  opts: Parameters<typeof startProxyProcess>[1] & { nodeFlags?: string[]; node?: string } = {},
): ReturnType<typeof startProxyProcess> {
  shared ??= npmLayout().then((layout) => {
    if (layout) process.once('exit', () => layout.dispose());
    return layout;
  });
  const layout = await shared;
  // BENCH_PROXY_NODE_FLAGS (e.g. "--cpu-prof --cpu-prof-dir=DIR", "--max-semi-space-size=2") reaches every bench's proxy.
  const { nodeFlags = (process.env.BENCH_PROXY_NODE_FLAGS ?? '').split(' ').filter(Boolean), node: otherNode, ...rest } = opts;
  if (rest.command) return startProxyProcess(args, rest);
  const [ourNode, script] = layout?.command ?? [process.execPath, binPath];
  // Another Node.js (a release's binary is built on one): the layout's cache is keyed by version.
  const node = otherNode ?? ourNode;
  return startProxyProcess(args, { ...rest, command: [node!, ...nodeFlags, script!], env: { ...layout?.env, ...rest.env } });
}

/** What startBenchProxy runs, for the report's first line. */
export function benchProxyForm(): string {
  return existsSync(bundlePath) ? 'the npm package (bin script + bundle, code cache warm)' : 'the clone (node + dist/src; the bundle is not built)';
}
