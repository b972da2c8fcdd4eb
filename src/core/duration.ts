// Timeouts are given the way people say them ("15s", "500ms"); a bare number means seconds
// because that is what `kubectl --request-timeout=15` and most CLIs do.

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const;
const PATTERN = /^(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h)?$/;

/** Milliseconds for "15s", "500ms", "1.5m", "2h" or "15" (seconds). Throws on anything else. */
export function parseDuration(text: string): number {
  const match = PATTERN.exec(text.trim());
  if (!match) {
    throw new Error(`invalid duration "${text}" (use e.g. 15s, 500ms, 2m, or a number of seconds)`);
  }
  const unit = (match[2] ?? 's') as keyof typeof UNIT_MS;
  const ms = Math.round(Number(match[1]) * UNIT_MS[unit]);
  // setTimeout silently turns anything above 2^31-1 ms into 1 ms; refuse instead.
  if (ms > 2 ** 31 - 1) throw new Error(`duration "${text}" is too long`);
  return ms;
}

/** The shortest exact spelling of ms, for help text defaults: 15000 → "15s", 500 → "500ms". */
export function formatDuration(ms: number): string {
  if (ms !== 0 && ms % UNIT_MS.m === 0) return `${ms / UNIT_MS.m}m`;
  if (ms % UNIT_MS.s === 0) return `${ms / UNIT_MS.s}s`;
  return `${ms}ms`;
}
