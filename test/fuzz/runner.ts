// Runs a fuzz target in a worker thread under a watchdog, with its corpus from
// test/fuzz/corpus/<target>/. A finding is saved there as crash-<hash> (so it replays as a
// regression test from then on); with `save`, new coverage-increasing inputs are added too.
import { Worker } from 'node:worker_threads';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from '../helpers/proxy-process.js';
import type { EngineResult, Finding } from './engine.js';
import type { WorkerInput } from './worker.js';

export const CORPUS_ROOT = path.join(repoRoot, 'test', 'fuzz', 'corpus');
const MAX_INPUT = 64 * 1024;

export interface RunOptions {
  target: string;
  seconds: number;
  maxExecs?: number;
  seed?: number;
  /** Add new coverage-increasing inputs to the corpus directory (off in CI: it would dirty the tree). */
  save?: boolean;
  /** No progress for this long is a hang. */
  hangMs?: number;
  /** Where the corpus directories live (default test/fuzz/corpus). */
  corpusRoot?: string;
}

export interface RunResult extends EngineResult {
  /** Where the finding was saved, if any. */
  crashFile?: string;
}

export function corpusDir(target: string, root = CORPUS_ROOT): string {
  return path.join(root, target);
}

export function loadCorpus(dir: string): Array<{ name: string; data: Buffer }> {
  mkdirSync(dir, { recursive: true });
  return readdirSync(dir)
    .filter((n) => !n.startsWith('.'))
    .sort()
    .map((name) => ({ name, data: readFileSync(path.join(dir, name)) }));
}

const hashOf = (data: Buffer) => createHash('sha1').update(data).digest('hex').slice(0, 16);

export async function runFuzzer(options: RunOptions): Promise<RunResult> {
  const dir = corpusDir(options.target, options.corpusRoot);
  const corpus = loadCorpus(dir);
  const shared = new SharedArrayBuffer(8 + MAX_INPUT);
  const header = new Int32Array(shared, 0, 2);
  const workerData: WorkerInput = {
    target: options.target,
    mode: 'fuzz',
    seconds: options.seconds,
    maxExecs: options.maxExecs,
    seed: options.seed ?? 1,
    corpus: corpus.map((c) => c.data),
    shared,
  };
  const worker = new Worker(new URL('./worker.js', import.meta.url), { workerData });
  const current = (): Buffer => Buffer.from(new Uint8Array(shared, 8, Atomics.load(header, 1)));
  const hangMs = options.hangMs ?? 10_000;

  const result = await new Promise<EngineResult>((resolve) => {
    const failed = (finding: Finding): void => {
      clearInterval(watchdog);
      resolve({ target: options.target, execs: Atomics.load(header, 0), features: 0, corpusSize: corpus.length, newInputs: [], finding, execsPerSecond: 0 });
    };
    let lastCount = -1;
    let lastChange = Date.now();
    const watchdog = setInterval(() => {
      const count = Atomics.load(header, 0);
      if (count !== lastCount) {
        lastCount = count;
        lastChange = Date.now();
      } else if (Date.now() - lastChange > hangMs) {
        const input = current();
        void worker.terminate();
        failed({ kind: 'hang', message: `no progress for ${hangMs} ms on one input`, input });
      }
    }, 250);
    worker.once('message', (r: EngineResult) => {
      clearInterval(watchdog);
      resolve({ ...r, newInputs: r.newInputs.map((b) => Buffer.from(b)), finding: r.finding && { ...r.finding, input: Buffer.from(r.finding.input) } });
    });
    // An exception nobody caught ends the worker: the input it was running is the crasher.
    worker.once('error', (err) => failed({ kind: 'exception', message: err.stack ?? String(err), input: current() }));
  });
  await worker.terminate();

  const out: RunResult = { ...result };
  if (result.finding) {
    out.crashFile = path.join(dir, `crash-${hashOf(result.finding.input)}`);
    writeFileSync(out.crashFile, result.finding.input);
  }
  if (options.save) {
    for (const input of result.newInputs) writeFileSync(path.join(dir, hashOf(input)), input);
  }
  return out;
}

/** Shrinks a target's corpus directory to the inputs that reach distinct features; returns how many were dropped. */
export async function minimiseCorpus(target: string, corpusRoot?: string): Promise<{ kept: number; dropped: number }> {
  const dir = corpusDir(target, corpusRoot);
  const corpus = loadCorpus(dir);
  const workerData: WorkerInput = {
    target,
    mode: 'minimise',
    seconds: 0,
    seed: 0,
    corpus: corpus.map((c) => c.data),
    shared: new SharedArrayBuffer(8 + MAX_INPUT),
  };
  const worker = new Worker(new URL('./worker.js', import.meta.url), { workerData });
  const { keep } = await new Promise<{ keep: number[] }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  await worker.terminate();
  const kept = new Set(keep);
  let dropped = 0;
  for (const [i, entry] of corpus.entries()) {
    // Hand-written seeds and saved crashers stay whatever their coverage.
    if (kept.has(i) || entry.name.startsWith('seed-') || entry.name.startsWith('crash-')) continue;
    rmSync(path.join(dir, entry.name));
    dropped++;
  }
  return { kept: corpus.length - dropped, dropped };
}
