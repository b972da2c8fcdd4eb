// Where the real-cluster test bed's binaries are (docs/real-cluster.md): test/real-cluster/build.sh
// builds two Go modules, each into a cache outside the clone keyed by a hash of its sources and of
// build.sh. test/real-cluster holds the current control plane, the konnectivity server and agent,
// and the tools both use (etcd launcher, node stand-in, PKI); test/real-cluster-v1.34 an older kube-apiserver,
// kube-controller-manager and kube-scheduler. When they are not built the tests skip with a
// reason, except where PROXYOUT_REQUIRE_REAL_CLUSTER=1 (CI builds them first), where they fail.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from './proxy-process.js';

export type ControlPlaneVersion = 'v1.37' | 'v1.34';

/** Per control plane: the k8s.io/kubernetes release its module builds, and the module's directory under test/ (also its cache's name). */
export const CONTROL_PLANES: Record<ControlPlaneVersion, { kubernetes: string; module: string }> = {
  'v1.37': { kubernetes: 'v1.37.2', module: 'real-cluster' },
  'v1.34': { kubernetes: 'v1.34.4', module: 'real-cluster-v1.34' },
};
export const KUBERNETES_VERSION = CONTROL_PLANES['v1.37'].kubernetes;

export const UPSTREAM_BINARIES = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;
export const TOOL_BINARIES = ['proxyout-etcd', 'proxyout-node', 'proxyout-pki', 'proxyout-grpc-client'] as const;
/** apiserver-network-proxy's cmd/server and cmd/agent, built in test/real-cluster (named as upstream's images name them). */
export const KONNECTIVITY_BINARIES = ['proxy-server', 'proxy-agent'] as const;
export type Binary = (typeof UPSTREAM_BINARIES)[number] | (typeof TOOL_BINARIES)[number] | (typeof KONNECTIVITY_BINARIES)[number];

const BUILD_SH = path.join(repoRoot, 'test', 'real-cluster', 'build.sh');
const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** The files whose contents key a module's build cache: the same list as build.sh's module_key. */
function keyFiles(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...keyFiles(dir, r));
    else if (/\.go$|^go\.(mod|sum)$/.test(entry.name)) out.push(r);
  }
  return out;
}

/**
 * build.sh's module_key: sha256sum of each key file (sorted, relative to the module, as ./path),
 * then of build.sh (as build.sh), hashed again; 16 hex digits.
 */
export function buildKey(version: ControlPlaneVersion = 'v1.37'): string {
  const dir = path.join(repoRoot, 'test', CONTROL_PLANES[version].module);
  const files = keyFiles(dir).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)); // ASCII paths: LC_ALL=C order
  const listing = files.map((f) => `${sha256(path.join(dir, f))}  ./${f}\n`).join('') + `${sha256(BUILD_SH)}  build.sh\n`;
  return createHash('sha256').update(listing).digest('hex').slice(0, 16);
}

export function cacheRoot(version: ControlPlaneVersion = 'v1.37'): string {
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'kubectl-proxyout', CONTROL_PLANES[version].module);
}

/** Where build.sh puts this checkout's binaries of that module (they are there when .complete is). */
export function binDir(version: ControlPlaneVersion = 'v1.37'): string {
  return path.join(cacheRoot(version), buildKey(version));
}

/** The file of a binary for a control plane: its upstream ones from its module, the tools from test/real-cluster's. */
export function binaryPath(version: ControlPlaneVersion, binary: Binary): string {
  return path.join(binDir((UPSTREAM_BINARIES as readonly string[]).includes(binary) ? version : 'v1.37'), binary);
}

/** The module directories a control plane needs that are not built (empty when it can start). */
function unbuilt(version: ControlPlaneVersion): string[] {
  const needed: ControlPlaneVersion[] = version === 'v1.37' ? ['v1.37'] : ['v1.37', version];
  return needed.map((v) => binDir(v)).filter((d) => !existsSync(path.join(d, '.complete')));
}

export function isBuilt(version: ControlPlaneVersion = 'v1.37'): boolean {
  return unbuilt(version).length === 0;
}

/** The error text for a control plane that is not built, or undefined. */
export function notBuiltReason(version: ControlPlaneVersion = 'v1.37'): string | undefined {
  const missing = unbuilt(version);
  return missing.length ? `real-cluster test bed (${version}) not built: run bash test/real-cluster/build.sh (looked in ${missing.join(', ')})` : undefined;
}

/** false when the control plane is built; else the skip reason (or a throw under PROXYOUT_REQUIRE_REAL_CLUSTER=1). */
export function skipUnlessRealCluster(version: ControlPlaneVersion = 'v1.37'): false | string {
  // The tests apply their manifests with real kubectl; CI's machine may lack it (.ci/run says so).
  if (spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).error)
    return 'kubectl is not on PATH: the real-cluster tests apply their manifests with it';
  const reason = notBuiltReason(version);
  if (!reason) return false;
  if (process.env.PROXYOUT_REQUIRE_REAL_CLUSTER === '1') throw new Error(reason);
  return reason;
}

/**
 * false when the konnectivity server and agent are built; else the skip reason (or a throw under
 * PROXYOUT_REQUIRE_REAL_CLUSTER=1). They need no kubectl, unlike the clusters.
 */
export function skipUnlessKonnectivityBuilt(): false | string {
  const reason = notBuiltReason('v1.37');
  if (!reason) return false;
  if (process.env.PROXYOUT_REQUIRE_REAL_CLUSTER === '1') throw new Error(reason);
  const go = spawnSync('go', ['version'], { stdio: 'ignore' }).error ? ' (go is not on PATH: it needs Go 1.26.2 or later)' : '';
  return `upstream konnectivity server and agent: ${reason}${go}`;
}
