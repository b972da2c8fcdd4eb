// Timings the test suite may shorten in a proxy it runs as a process, set by no flag or config
// key and not documented for users (the product's timings stand without them): the route retry
// delay (routes/guest-cluster/lifecycle.ts), the repeated-line window (core/log-limit.ts), how long a
// reload waits for a new route's sync (proxy/proxy.ts), how long `connect` waits for a daemon that
// gets no further (managed/start-progress.ts), how long `auto` keeps a "no tunnel" answer
// (tunnel/negotiate.ts), how long a reader behind may hold a shared SPDY tunnel (tunnel/spdy/tunnel.ts), how long an HTTP proxy has to answer a CONNECT (cluster/proxy-failures.ts) and the caches a
// watch-list refusal (cluster/watch-list-support.ts); and the points a race test may hold a command at
// (testHookPause).
import { existsSync, writeFileSync } from 'node:fs';

/** The variable's value as whole milliseconds (1 to 999,999); undefined when unset or anything else. */
export function testHookMs(name: string): number | undefined {
  const raw = process.env[name];
  return raw !== undefined && /^[1-9]\d{0,5}$/.test(raw) ? Number(raw) : undefined;
}

/**
 * With the variable `name` set to a path: writes `<path>.waiting`, then waits until `path` exists
 * (at most 30 s), so that a test can act while the command stands at this point. Unset: returns
 * at once. managed/reload.ts holds here between making a table and writing it; managed/connect.ts
 * between finding no daemon and taking the state lock.
 */
export async function testHookPause(name: string): Promise<void> {
  const file = process.env[name];
  if (!file) return;
  writeFileSync(`${file}.waiting`, '');
  const deadline = Date.now() + 30_000;
  while (!existsSync(file) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}
