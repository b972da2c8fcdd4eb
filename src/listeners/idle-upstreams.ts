// Upstream streams idle in the HTTP listener's pools (http-forward.ts's TunnelAgent), every
// listener's together, each closed after its idle time. Over per-stream WebSockets (or a direct
// route) each holds a file, and no stream slot, for seconds after its requests ended: the stream
// cap and the connection budget count them, and close the oldest rather than go past the
// open-file limit or refuse a client for their room (proxy/limits.ts, connection-budget.ts).
import type { Duplex } from 'node:stream';

/** Their idle timers, in the order they went idle: the oldest go first. */
const idle = new Map<Duplex, NodeJS.Timeout>();
/** Streams whose close is heard (once each, however often they go idle). */
const heard = new WeakSet<Duplex>();
function closed(this: Duplex): void {
  pooledBusy(this);
}

/** Put in a pool between requests, for `idleMs` at most; it leaves the count when taken again or closed. */
export function pooledIdle(stream: Duplex, idleMs: number): void {
  const timer = setTimeout(() => stream.destroy(), idleMs);
  timer.unref();
  idle.set(stream, timer);
  if (heard.has(stream)) return;
  heard.add(stream);
  stream.on('close', closed);
}

/** Taken for a request (or closed). */
export function pooledBusy(stream: Duplex): void {
  clearTimeout(idle.get(stream));
  idle.delete(stream);
}

export function idleUpstreams(): number {
  return idle.size;
}

/** Closes up to `n` idle pooled upstreams, the oldest first; returns how many. */
export function shedIdleUpstreams(n: number): number {
  let shed = 0;
  for (const stream of idle.keys()) {
    if (shed >= n) break;
    pooledBusy(stream);
    stream.destroy();
    shed++;
  }
  return shed;
}
