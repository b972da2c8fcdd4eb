// Timings the test suite may shorten in a proxy it runs as a process, set by no flag or config
// key and not documented for users (the product's timings stand without them): the route retry
// delay (routes/lifecycle.ts) and the repeated-line window (core/log-limit.ts).

/** The variable's value as whole milliseconds (1 to 999,999); undefined when unset or anything else. */
export function testHookMs(name: string): number | undefined {
  const raw = process.env[name];
  return raw !== undefined && /^[1-9]\d{0,5}$/.test(raw) ? Number(raw) : undefined;
}
