// Coverage feedback for the fuzzer from V8's own block coverage, read in-process through the
// inspector protocol (Profiler.startPreciseCoverage with callCount + detailed, then
// Profiler.takePreciseCoverage after every input, which also resets the counters). No
// instrumentation and no native code: what libFuzzer's edge counters give, approximated by
// "this block ran, about this many times".
import inspector from 'node:inspector';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface Range {
  startOffset: number;
  endOffset: number;
  count: number;
}
interface FunctionCoverage {
  ranges: Range[];
}
interface ScriptCoverage {
  url: string;
  functions: FunctionCoverage[];
}

/** AFL's hit-count buckets: 1, 2, 3, 4–7, 8–15, 16–31, 32–127, 128+. */
function bucket(count: number): number {
  if (count <= 3) return count;
  if (count < 8) return 4;
  if (count < 16) return 5;
  if (count < 32) return 6;
  return count < 128 ? 7 : 8;
}

export class Coverage {
  private readonly session = new inspector.Session();
  /** Every block range seen so far, per function: see features() for why. */
  private readonly blocks = new Map<string, Map<string, [number, number]>>();
  /** URLs of the included scripts that have run (for the dictionary, see autoDictionary). */
  readonly scripts = new Set<string>();

  constructor(private readonly include: (url: string) => boolean) {
    this.session.connect();
    this.post('Profiler.enable');
    this.post('Profiler.startPreciseCoverage', { callCount: true, detailed: true });
  }

  /** In-process sessions answer synchronously, so this is a plain call. */
  private post(method: string, params?: object): any {
    let result: unknown;
    let error: Error | null = null;
    this.session.post(method, params, (err, res) => {
      error = err;
      result = res;
    });
    if (error) throw error;
    return result;
  }

  /** Discards the counts gathered so far (e.g. by set-up code). */
  reset(): void {
    this.post('Profiler.takePreciseCoverage');
  }

  /**
   * The features of everything run since the last call: "block B of the included scripts ran,
   * count bucket K". V8 folds a block whose count equals its parent's into the parent, so a block
   * that once showed up on its own (say with count 0) and is now absent ran as often as the
   * innermost reported range around it: that is what it is credited with.
   */
  features(): Set<string> {
    const out = new Set<string>();
    const { result } = this.post('Profiler.takePreciseCoverage') as { result: ScriptCoverage[] };
    for (const script of result) {
      if (!this.include(script.url)) continue;
      this.scripts.add(script.url);
      for (const fn of script.functions) {
        const ranges = fn.ranges;
        if (ranges.length === 0 || ranges[0]!.count === 0) continue;
        const key = `${script.url}#${ranges[0]!.startOffset}`;
        let known = this.blocks.get(key);
        if (!known) this.blocks.set(key, (known = new Map()));
        const reported = new Map<string, number>();
        for (const r of ranges) {
          const id = `${r.startOffset}-${r.endOffset}`;
          reported.set(id, r.count);
          if (!known.has(id)) known.set(id, [r.startOffset, r.endOffset]);
        }
        for (const [id, [start, end]] of known) {
          let count = reported.get(id);
          if (count === undefined) {
            let best: Range | undefined;
            for (const r of ranges) {
              if (r.startOffset <= start && r.endOffset >= end && (!best || r.endOffset - r.startOffset < best.endOffset - best.startOffset)) best = r;
            }
            count = best?.count ?? 0;
          }
          if (count > 0) out.add(`${key}:${id}:${bucket(count)}`);
        }
      }
    }
    return out;
  }

  stop(): void {
    this.post('Profiler.stopPreciseCoverage');
    this.session.disconnect();
  }
}

/**
 * AFL++'s "autodictionary" for JavaScript: the literals of the code under test. Coverage cannot
 * see the operands of a comparison (libFuzzer's CMP tracing), so the constants those comparisons
 * are made against — version bytes, header names, delimiters — are offered as tokens instead.
 */
export function autoDictionary(urls: Iterable<string>, max = 400): Buffer[] {
  const tokens = new Map<string, Buffer>();
  const add = (b: Buffer) => {
    if (b.length > 0 && tokens.size < max) tokens.set(b.toString('latin1'), b);
  };
  for (const url of urls) {
    if (!url.startsWith('file:')) continue;
    let source: string;
    try {
      source = readFileSync(fileURLToPath(url), 'utf8');
    } catch {
      continue;
    }
    for (const m of source.matchAll(/'([^'\\\n]{1,40})'|"([^"\\\n]{1,40})"/g)) add(Buffer.from(m[1] ?? m[2]!, 'latin1'));
    for (const m of source.matchAll(/\b(0x[0-9a-fA-F]{1,4}|\d{1,5})\b/g)) {
      const n = Number(m[1]);
      if (n <= 0xff) add(Buffer.from([n]));
      else if (n <= 0xffff) add(Buffer.from([n >> 8, n & 0xff]));
      add(Buffer.from(String(n), 'latin1'));
    }
  }
  return [...tokens.values()];
}
