// Raw results as files: a bench that calls writeResults(name, data) leaves bench/results/<name>.json
// (BENCH_RESULTS_DIR elsewhere) with what was measured and where — the date, node version, CPU
// model and count, memory, kernel, the commit, the BENCH_* settings — beside its figures. The
// tables in docs/performance.md are read from these files, not retyped from a terminal. A run
// overwrites the file of its bench; keep a copy (or commit it) to keep a run.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** bench/results in the repository (this file runs as dist/bench/results.js). */
const DEFAULT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bench/results');

function commit(): string | undefined {
  try {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: path.dirname(DEFAULT_DIR), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      cwd: path.dirname(DEFAULT_DIR),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return dirty ? `${head}+dirty` : head;
  } catch {
    return undefined; // not a git checkout, or no git
  }
}

/**
 * Writes bench/results/<name>.json and returns its path; a failure to write is reported, never
 * thrown. A figure that could not be had (NaN) is written as null.
 */
export function writeResults(name: string, data: unknown): string | undefined {
  const dir = process.env.BENCH_RESULTS_DIR ?? DEFAULT_DIR;
  const file = path.join(dir, `${name}.json`);
  const cpus = os.cpus();
  const record = {
    bench: name,
    date: new Date().toISOString(),
    node: process.version,
    cpu: { model: cpus[0]?.model.trim() ?? 'unknown', count: cpus.length },
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    commit: commit(),
    settings: Object.fromEntries(
      Object.entries(process.env)
        .filter(([k]) => k.startsWith('BENCH_'))
        .sort(),
    ),
    figures: data,
  };
  try {
    mkdirSync(dir, { recursive: true });
    writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`);
    process.stderr.write(`results: ${file}\n`);
    return file;
  } catch (err) {
    process.stderr.write(`results: could not write ${file}: ${err instanceof Error ? err.message : String(err)}\n`);
    return undefined;
  }
}
