// Running the real CLI's `doctor --json` and reading its report.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { binPath } from './proxy-process.js';

export interface DoctorCheck {
  scope: string;
  name: string;
  status: 'ok' | 'warn' | 'fail' | 'skip';
  detail: string;
  fix?: string;
}

export interface DoctorRun {
  code: number;
  report: { ok: boolean; checks: DoctorCheck[] };
  /** The first check of that name (asserts there is one). */
  get(name: string): DoctorCheck;
  /** Every check of that name, in order. */
  all(name: string): DoctorCheck[];
  out: string;
  ms: number;
}

/**
 * `bin/kubectl-proxyout doctor --json` with `args`; the listen check on a free port and the state
 * directory `stateDir`, so neither depends on this machine.
 */
export async function runDoctor(args: string[], stateDir: string, env: NodeJS.ProcessEnv = {}): Promise<DoctorRun> {
  const started = Date.now();
  const r = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [binPath, 'doctor', '--listen-socks', '127.0.0.1:0', '--json', ...args],
      { encoding: 'utf8', env: { ...process.env, KUBECTL_PROXYOUT_STATE_DIR: stateDir, ...env }, timeout: 120_000 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
  let report: DoctorRun['report'];
  try {
    report = JSON.parse(r.stdout) as DoctorRun['report'];
  } catch {
    throw new Error(`doctor printed no JSON (exit ${r.code}): ${r.stdout}${r.stderr}`);
  }
  const all = (name: string) => report.checks.filter((x) => x.name === name);
  const get = (name: string) => {
    const c = all(name)[0];
    assert.ok(c, `no ${name} check in ${r.stdout}`);
    return c;
  };
  return { code: r.code, report, get, all, out: r.stdout + r.stderr, ms: Date.now() - started };
}
