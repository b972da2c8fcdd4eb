// How far apart two words are, to suggest the word a user meant ("did you mean include?").

/** Levenshtein distance: insertions, deletions and substitutions of one character. */
export function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/**
 * The word of `known` that `word` is most likely a slip for: the same but for case, "-" and "_"
 * (extraCa, Include), or a typo away (1 edit for short words, 2 from 5 letters); else undefined.
 */
export function closestWord(word: string, known: readonly string[]): string | undefined {
  const bare = (w: string) => w.toLowerCase().replace(/[-_]/g, '');
  const same = known.find((k) => bare(k) === bare(word));
  if (same) return same;
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(bare(word), bare(k));
    if (d <= (k.length >= 5 ? 2 : 1) && d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best;
}
