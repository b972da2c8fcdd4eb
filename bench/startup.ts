// Start-up figures ("instant start"), for the npm install (node + bin script) and the
// single executable (dist/pkg, when `npm run package` built it), next to kubectl itself against
// the same simulated cluster: `--help`, `status` (no proxies), `connect` until it returns with the
// daemon listening and its caches synced, and the idle daemon's RSS. Wall times are medians of
// BENCH_STARTUP_ROUNDS runs; they swing with the machine's load, so read them side by side.
// Alone: `npm run build && node dist/bench/startup.js`; also printed at the end of `npm run bench`.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestCluster } from '../test/helpers/cluster.js';
import { binPath } from '../test/helpers/proxy-process.js';
import { packagedBinary } from '../test/helpers/package.js';
import { npmLayout } from './npm-layout.js';

const ROUNDS = Number(process.env.BENCH_STARTUP_ROUNDS ?? 5);
/** How long the last daemon stays idle before its settled RSS is read (0 = not read). */
const SETTLE_S = Number(process.env.BENCH_STARTUP_SETTLE_S ?? 25);

interface Run {
  ms: number;
  code: number;
  stdout: string;
  stderr: string;
  /** The command line, and why it failed when it did: "exit 2", "killed by SIGTERM after the 60 s timeout", "spawn … ENOENT". */
  command: string;
  failure?: string;
}

const TIMEOUT_MS = 60_000;

/** Why execFile's callback got an error: a timeout and a signal are not an exit code (both used to read "exit 1"). */
export function runFailure(err: (Error & { code?: unknown; killed?: boolean; signal?: string | null }) | null, timeoutMs: number): string | undefined {
  if (!err) return undefined;
  if (typeof err.code === 'number') return `exit ${err.code}`;
  if (err.killed && err.signal) return `killed by ${err.signal} after the ${timeoutMs / 1000} s timeout`;
  if (err.signal) return `killed by ${err.signal}`;
  return err.message.split('\n')[0]!;
}

function timed(file: string, args: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  return new Promise((resolve) => {
    const started = process.hrtime.bigint();
    execFile(file, args, { env: { ...process.env, ...env }, encoding: 'utf8', timeout: TIMEOUT_MS }, (err, stdout, stderr) => {
      const failure = runFailure(err, TIMEOUT_MS);
      resolve({
        ms: Number(process.hrtime.bigint() - started) / 1e6,
        code: err ? (typeof err.code === 'number' ? err.code : 1) : 0,
        stdout,
        stderr,
        command: [file, ...args].join(' '),
        failure,
      });
    });
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

/** Resident set size of a process, MiB (/proc on Linux, ps elsewhere). */
async function rssMiB(pid: number): Promise<number> {
  if (process.platform === 'linux') {
    const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
    return kb / 1024;
  }
  const r = await timed('ps', ['-o', 'rss=', '-p', String(pid)], {});
  return Number(r.stdout.trim()) / 1024;
}

export interface StartupRow {
  what: string;
  helpMs: number;
  statusMs: number;
  connectMs: number;
  idleRssMiB: number;
  /** RSS of the last daemon after BENCH_STARTUP_SETTLE_S more seconds idle. */
  settledRssMiB?: number;
}

async function measureCli(what: string, command: string[], kubeconfig: string, extraEnv: Record<string, string> = {}): Promise<StartupRow> {
  const state = mkdtempSync(path.join(os.tmpdir(), 'proxyout-bench-state-'));
  const env = { ...extraEnv, KUBECTL_PROXYOUT_STATE_DIR: state };
  const [file, ...lead] = command as [string, ...string[]];
  // A failure names the row it was measuring, as well as the command and why.
  const run = (args: string[]) => timed(file, [...lead, ...args], env).then((r) => (r.failure ? { ...r, command: `${what}: ${r.command}` } : r));
  const help: number[] = [];
  const status: number[] = [];
  const connect: number[] = [];
  const rss: number[] = [];
  let settled: number | undefined;
  try {
    for (let i = 0; i < ROUNDS; i++) {
      help.push((await must(run(['--help']))).ms);
      status.push((await must(run(['status']))).ms);
      const c = await must(run(['connect', '--socks', '--no-proxy-auth', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--json']));
      connect.push(c.ms);
      const { id, pid } = JSON.parse(c.stdout) as { id: string; pid: number };
      try {
        // Idle: listening, caches synced, no client. A second for start-up garbage to be collected.
        await new Promise((r) => setTimeout(r, 1_000));
        rss.push(await rssMiB(pid));
        // The last daemon stays idle longer: V8's memory reducer gives the start-up heap back after
        // ~15–20 s of quiet, which is what an idle daemon holds from then on (median of 3 readings).
        if (i === ROUNDS - 1 && SETTLE_S > 0) {
          await new Promise((r) => setTimeout(r, SETTLE_S * 1000));
          const readings: number[] = [];
          for (let k = 0; k < 3; k++) {
            if (k > 0) await new Promise((r) => setTimeout(r, 1_000));
            readings.push(await rssMiB(pid));
          }
          settled = median(readings);
        }
      } finally {
        // Never leave a daemon behind, even when a reading failed.
        await must(run(['disconnect', id]));
      }
    }
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
  return { what, helpMs: median(help), statusMs: median(status), connectMs: median(connect), idleRssMiB: median(rss), settledRssMiB: settled };
}

async function must(p: Promise<Run>): Promise<Run> {
  const r = await p;
  if (r.failure) throw new Error(`${r.command}: ${r.failure}: ${(r.stderr || r.stdout).trim()}`);
  return r;
}

async function measureKubectl(kubeconfig: string): Promise<{ versionMs: number; getNsMs: number } | string> {
  const probe = await timed('kubectl', ['version', '--client'], {});
  // Not installed (spawn ENOENT) is one reason; a kubectl that fails or hangs is another, not "not installed".
  if (probe.failure) return `${probe.command}: ${probe.failure}`;
  const version: number[] = [];
  const getNs: number[] = [];
  const cache = mkdtempSync(path.join(os.tmpdir(), 'proxyout-bench-kube-'));
  try {
    for (let i = 0; i < ROUNDS; i++) {
      version.push((await must(timed('kubectl', ['version', '--client'], {}))).ms);
      getNs.push((await must(timed('kubectl', ['--kubeconfig', kubeconfig, '--cache-dir', cache, 'get', 'ns'], {}))).ms);
    }
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
  return { versionMs: median(version), getNsMs: median(getNs) };
}

/**
 * Node's own start-up in the same run: the floor under every row. NODE_EXTRA_CA_CERTS makes every
 * Node process parse that file before any JavaScript runs (~60 ms for a system bundle on the
 * 2-core machine), so when it is set the floor and the single executable are measured without it too.
 */
async function measureFloor(): Promise<{ label: string; nodeMs: number; helpMs?: number; statusMs?: number }[]> {
  const state = mkdtempSync(path.join(os.tmpdir(), 'proxyout-bench-state-'));
  const variants: { label: string; env: Record<string, string> }[] = [{ label: 'as run', env: {} }];
  if (process.env.NODE_EXTRA_CA_CERTS) variants.push({ label: 'NODE_EXTRA_CA_CERTS unset', env: { NODE_EXTRA_CA_CERTS: '' } });
  const out: { label: string; nodeMs: number; helpMs?: number; statusMs?: number }[] = [];
  try {
    for (const v of variants) {
      const env = { ...v.env, KUBECTL_PROXYOUT_STATE_DIR: state };
      const node: number[] = [];
      const help: number[] = [];
      const status: number[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        node.push((await must(timed(process.execPath, ['-e', '0'], env))).ms);
        if (!existsSync(packagedBinary)) continue;
        help.push((await must(timed(packagedBinary, ['--help'], env))).ms);
        status.push((await must(timed(packagedBinary, ['status'], env))).ms);
      }
      out.push({ label: v.label, nodeMs: median(node), ...(help.length ? { helpMs: median(help), statusMs: median(status) } : {}) });
    }
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
  return out;
}

/** Prints the start-up table; `cluster` is the simulated cluster the other benchmarks use. */
export async function reportStartup(cluster: TestCluster): Promise<StartupRow[]> {
  const rows = [await measureCli('clone: node + dist/src', [process.execPath, binPath], cluster.kubeconfig)];
  const npm = await npmLayout();
  if (npm) {
    try {
      rows.push(await measureCli('npm package: bin + bundle', npm.command, cluster.kubeconfig, npm.env));
    } finally {
      npm.dispose();
    }
  }
  if (existsSync(packagedBinary)) rows.push(await measureCli('single executable', [packagedBinary], cluster.kubeconfig));
  const kubectl = await measureKubectl(cluster.kubeconfig);
  const ms = (v: number) => v.toFixed(0).padStart(8);
  console.log(`\nStart-up (median of ${ROUNDS}; connect = until the daemon listens with synced caches; RSS of the idle daemon)`);
  console.log(`what                          --help ms  status ms  connect ms  RSS 1 s MiB  RSS ${SETTLE_S} s MiB`);
  for (const r of rows)
    console.log(
      `${r.what.padEnd(28)}${ms(r.helpMs)}   ${ms(r.statusMs)}    ${ms(r.connectMs)}    ${r.idleRssMiB.toFixed(1).padStart(8)}    ${r.settledRssMiB?.toFixed(1).padStart(8) ?? '       -'}`,
    );
  if (!existsSync(packagedBinary)) console.log(`single executable: not built (npm run package)`);
  for (const f of await measureFloor())
    console.log(
      `node -e 0 (${f.label}): ${f.nodeMs.toFixed(0)} ms` +
        (f.helpMs === undefined ? '' : `; single executable --help ${f.helpMs.toFixed(0)} ms, status ${f.statusMs!.toFixed(0)} ms`),
    );
  if (typeof kubectl === 'object')
    console.log(`kubectl version --client: ${kubectl.versionMs.toFixed(0)} ms; kubectl get ns (same cluster): ${kubectl.getNsMs.toFixed(0)} ms`);
  else console.log(`kubectl: no figures (${kubectl})`);
  console.log(
    `Targets: --help and status ≤ 150 ms; connect ≤ 1 s; idle daemon RSS ≤ 80 MiB (read ${SETTLE_S} s after connect, when the start-up heap is given back).`,
  );
  return rows;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { startTestCluster } = await import('../test/helpers/cluster.js');
  const cluster = await startTestCluster();
  try {
    console.log(`kubectl-proxyout start-up benchmark — node ${process.version}, ${new Date().toISOString()}, load ${os.loadavg()[0]!.toFixed(2)}`);
    await reportStartup(cluster);
  } finally {
    await cluster.close();
  }
}
