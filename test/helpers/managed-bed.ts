// The bed of the managed-proxy tests (managed.test.ts, managed-daemons.test.ts): a simulated
// cluster and a temporary state directory per file, the real CLI, and no daemon left behind.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from './cluster.js';
import { runCli } from './proxy-process.js';
import { isAlive } from '../../src/state/process.js';
import { statusItem, statusItems } from './status-json.js';

export let cluster: TestCluster;
export let stateDir: string;
export const daemons = new Set<number>();

export interface Connected {
  id: string;
  pid: number;
  state: string;
  existing: boolean;
  context: string;
  namespace: string;
  socks: string | null;
  http: string | null;
  logFile: string;
  auth: { user: string; generated: boolean } | null;
  env: Record<string, string>;
}

export const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: stateDir });
export const cli = (args: string[], timeoutMs?: number, extraEnv: Record<string, string> = {}) => runCli(args, { env: { ...env(), ...extraEnv }, timeoutMs });
export const mode = (p: string) => statSync(p).mode & 0o777;
export const proxyDir = (id: string) => path.join(stateDir, 'proxies', id);

export async function connect(args: string[] = [], kubeconfig = cluster.kubeconfig, extraEnv?: Record<string, string>): Promise<Connected> {
  const r = await cli(['connect', '--socks', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--json', ...args], undefined, extraEnv);
  assert.equal(r.code, 0, `connect failed: ${r.stderr}`);
  const out = JSON.parse(r.stdout) as Connected & { apiVersion: string; kind: string };
  assert.deepEqual([out.apiVersion, out.kind], ['kubectl-proxyout/v1', 'ConnectResult']);
  daemons.add(out.pid);
  return out;
}

export async function status(id?: string): Promise<any> {
  const r = await cli(['status', ...(id ? [id] : []), '--json']);
  assert.equal(r.code, 0, r.stderr);
  return id ? statusItem(r.stdout) : statusItems(r.stdout);
}

export async function gone(pid: number, ms: number): Promise<void> {
  await eventually(async () => !isAlive(pid), ms, 50);
}

/** Daemons whose command line names this state dir's IDs (Linux: count processes for real). */
export function daemonsFor(id: string): number[] {
  if (process.platform !== 'linux') return [];
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      const at = argv.indexOf('daemon');
      if (at > 0 && argv[at + 1] === '--id' && argv[at + 2] === id && readFileSync(`/proc/${name}/environ`, 'utf8').includes(stateDir)) pids.push(Number(name));
    } catch {
      /* gone meanwhile */
    }
  }
  return pids;
}

/** Registers the file's before (cluster, state directory) and after (every daemon stopped). */
export function useManagedBed(): void {
  before(async () => {
    cluster = await startTestCluster();
    stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-managed-'));
  });

  after(async () => {
    // No daemon may outlive the run, whatever failed above.
    await cli(['quit']).catch(() => undefined);
    for (const pid of daemons) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
    await cluster?.close();
    rmSync(stateDir, { recursive: true, force: true });
  });
}
