// Seeded mutations for the coverage-guided fuzzer (engine.ts): the classic byte-level set of
// AFL/libFuzzer (bit flips, interesting bytes, arithmetic on length fields, insert, delete,
// duplicate, splice, dictionary tokens), stacked 1–4 deep. Deterministic for a given seed.

/** mulberry32: small, fast, and the same sequence for the same seed on every platform. */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  below(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(list: readonly T[]): T {
    return list[this.below(list.length)]!;
  }
}

// Boundaries that length fields, version bytes and delimiters care about.
const INTERESTING = [0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x0a, 0x0d, 0x20, 0x25, 0x2e, 0x2f, 0x3a, 0x40, 0x5c, 0x7f, 0x80, 0xfe, 0xff];

export interface MutationContext {
  rng: Rng;
  dictionary: readonly Buffer[];
  /** Other corpus entries, for splicing. */
  corpus: readonly Buffer[];
  maxLen: number;
}

type Mutator = (input: Buffer, m: MutationContext) => Buffer;

const at = (input: Buffer, m: MutationContext): number => m.rng.below(Math.max(1, input.length));

const MUTATORS: Mutator[] = [
  function flipBit(input, m) {
    if (input.length === 0) return input;
    const out = Buffer.from(input);
    const i = at(input, m);
    out[i] = out[i]! ^ (1 << m.rng.below(8));
    return out;
  },
  function interestingByte(input, m) {
    if (input.length === 0) return Buffer.from([m.rng.pick(INTERESTING)]);
    const out = Buffer.from(input);
    out[at(input, m)] = m.rng.pick(INTERESTING);
    return out;
  },
  function randomByte(input, m) {
    if (input.length === 0) return input;
    const out = Buffer.from(input);
    out[at(input, m)] = m.rng.below(256);
    return out;
  },
  function arithmetic(input, m) {
    if (input.length === 0) return input;
    const out = Buffer.from(input);
    const i = at(input, m);
    out[i] = (out[i]! + m.rng.pick([-16, -2, -1, 1, 2, 16]) + 256) & 0xff;
    return out;
  },
  function insertBytes(input, m) {
    const i = m.rng.below(input.length + 1);
    const bytes = Buffer.from(Array.from({ length: 1 + m.rng.below(8) }, () => m.rng.below(256)));
    return Buffer.concat([input.subarray(0, i), bytes, input.subarray(i)]);
  },
  function deleteRange(input, m) {
    if (input.length < 2) return input;
    const i = at(input, m);
    const n = 1 + m.rng.below(Math.min(16, input.length - i));
    return Buffer.concat([input.subarray(0, i), input.subarray(i + n)]);
  },
  function duplicateRange(input, m) {
    if (input.length === 0) return input;
    const i = at(input, m);
    const n = 1 + m.rng.below(Math.min(64, input.length - i));
    const j = m.rng.below(input.length + 1);
    return Buffer.concat([input.subarray(0, j), input.subarray(i, i + n), input.subarray(j)]);
  },
  function insertToken(input, m) {
    if (m.dictionary.length === 0) return input;
    const i = m.rng.below(input.length + 1);
    return Buffer.concat([input.subarray(0, i), m.rng.pick(m.dictionary), input.subarray(i)]);
  },
  function overwriteToken(input, m) {
    if (m.dictionary.length === 0) return input;
    const token = m.rng.pick(m.dictionary);
    const i = m.rng.below(input.length + 1);
    return Buffer.concat([input.subarray(0, i), token, input.subarray(i + token.length)]);
  },
  function splice(input, m) {
    if (m.corpus.length === 0) return input;
    const other = m.rng.pick(m.corpus);
    return Buffer.concat([input.subarray(0, m.rng.below(input.length + 1)), other.subarray(m.rng.below(other.length + 1))]);
  },
  function truncate(input, m) {
    return input.subarray(0, m.rng.below(input.length + 1));
  },
];

/** One to four stacked mutations of `input`, capped at maxLen. */
export function mutate(input: Buffer, m: MutationContext): Buffer {
  let out = input;
  const rounds = 1 + m.rng.below(4);
  for (let r = 0; r < rounds; r++) out = m.rng.pick(MUTATORS)(out, m);
  return out.length > m.maxLen ? out.subarray(0, m.maxLen) : out;
}
