// The fuzzing loop (run inside a worker, see runner.ts): replay the corpus, then mutate inputs
// from it and keep every mutant that reaches a new coverage feature, until the time or exec
// budget is spent or a target reports a finding. A finding is an exception the target did not
// expect (an untyped throw from the code under test, a broken invariant, an error-level log line)
// or a hang; the runner's watchdog catches hangs that never yield.
import { Coverage, autoDictionary } from './coverage.js';
import { Rng, mutate } from './mutate.js';

export interface FuzzTarget {
  name: string;
  /** Longest input to try. */
  maxLen: number;
  /** Protocol tokens worth splicing in. */
  dictionary: Buffer[];
  /** Which scripts' coverage guides the search (by URL). */
  include(url: string): boolean;
  setup?(): Promise<void>;
  /** Runs one input; throws on a finding. Must be done with all its work when it resolves. */
  run(input: Buffer): void | Promise<void>;
  teardown?(): Promise<void>;
}

export interface Finding {
  kind: 'exception' | 'hang';
  message: string;
  input: Buffer;
}

export interface EngineOptions {
  seconds: number;
  maxExecs?: number;
  seed: number;
  corpus: Buffer[];
  /** Called before every input, so a watchdog knows what was running if we never come back. */
  beforeExec?(input: Buffer): void;
}

export interface EngineResult {
  target: string;
  execs: number;
  features: number;
  corpusSize: number;
  /** Mutants that reached new features (not the seeds). */
  newInputs: Buffer[];
  finding?: Finding;
  execsPerSecond: number;
}

export async function runEngine(target: FuzzTarget, options: EngineOptions): Promise<EngineResult> {
  await target.setup?.();
  const coverage = new Coverage((url) => target.include(url));
  const seen = new Set<string>();
  const corpus: Buffer[] = [];
  const newInputs: Buffer[] = [];
  const rng = new Rng(options.seed);
  const started = Date.now();
  let execs = 0;

  /** Runs one input; the features it reached that nothing reached before, or a finding. */
  const exec = async (input: Buffer): Promise<{ fresh: number; finding?: Finding }> => {
    options.beforeExec?.(input);
    execs++;
    try {
      await target.run(input);
    } catch (err) {
      return { fresh: 0, finding: { kind: 'exception', message: err instanceof Error ? (err.stack ?? err.message) : String(err), input } };
    }
    let fresh = 0;
    for (const f of coverage.features()) {
      if (seen.has(f)) continue;
      seen.add(f);
      fresh++;
    }
    return { fresh };
  };

  let finding: Finding | undefined;
  try {
    coverage.reset();
    // The corpus first: every entry is a regression test, and together they seed the search.
    for (const input of options.corpus) {
      const r = await exec(input);
      if (r.finding) return done(r.finding);
      corpus.push(input);
    }
    if (corpus.length === 0) {
      // Start from nothing, but run it: the dictionary below needs to know which code ran.
      const r = await exec(Buffer.alloc(0));
      if (r.finding) return done(r.finding);
      corpus.push(Buffer.alloc(0));
    }
    // The time budget is for new inputs; the replay above is a fixed cost.
    const deadline = Date.now() + options.seconds * 1000;
    // The target's tokens plus the literals of the code the replay reached.
    const dictionary = [...target.dictionary, ...autoDictionary(coverage.scripts)];
    const context = { rng, dictionary, corpus, maxLen: target.maxLen };
    while (Date.now() < deadline && (options.maxExecs === undefined || execs < options.maxExecs)) {
      // Favour recent finds a little: they sit at the frontier of what is covered.
      const parent = rng.next() < 0.3 ? corpus[corpus.length - 1 - rng.below(Math.min(8, corpus.length))]! : rng.pick(corpus);
      const input = mutate(parent, context);
      const r = await exec(input);
      if (r.finding) {
        finding = r.finding;
        break;
      }
      if (r.fresh > 0) {
        corpus.push(input);
        newInputs.push(input);
      }
    }
  } finally {
    coverage.stop();
    await target.teardown?.();
  }
  return done(finding);

  function done(f: Finding | undefined): EngineResult {
    const seconds = Math.max(0.001, (Date.now() - started) / 1000);
    return { target: target.name, execs, features: seen.size, corpusSize: corpus.length, newInputs, finding: f, execsPerSecond: Math.round(execs / seconds) };
  }
}

/**
 * Corpus minimisation (libFuzzer's -merge): the smallest inputs that together reach every block
 * the whole corpus reaches, shortest first. Hit-count buckets guide the search but are left out
 * here, which keeps the corpus (replayed in every test run) small. Returns the indices to keep.
 */
export async function minimise(target: FuzzTarget, corpus: Buffer[]): Promise<number[]> {
  await target.setup?.();
  const coverage = new Coverage((url) => target.include(url));
  const perInput: Array<Set<string>> = [];
  try {
    coverage.reset();
    for (const input of corpus) {
      try {
        await target.run(input);
      } catch {
        // Crashers are kept regardless: they are regression tests.
      }
      perInput.push(new Set([...coverage.features()].map((f) => f.replace(/:\d+$/, ''))));
    }
  } finally {
    coverage.stop();
    await target.teardown?.();
  }
  const order = corpus.map((_, i) => i).sort((a, b) => corpus[a]!.length - corpus[b]!.length || a - b);
  const covered = new Set<string>();
  const keep: number[] = [];
  for (const i of order) {
    const fresh = [...perInput[i]!].filter((f) => !covered.has(f));
    if (fresh.length === 0) continue;
    for (const f of fresh) covered.add(f);
    keep.push(i);
  }
  return keep.sort((a, b) => a - b);
}
