// The API server's name, looked up for every connection to it: each stream over the per-stream
// v4 WebSocket is one, and so is each SPDY tunnel and request. getaddrinfo runs on libuv's
// threadpool, where slow work such as it gets two threads by default (the direct route's look-ups
// share them, routes/direct/lookup-slots.ts): a burst of 500 streams queued 500 look-ups of one
// name there, and behind a resolver that takes 100 ms the last waited 25 s, past
// --connect-timeout. Look-ups of a name under way together are one, and its answer serves those
// that follow for a second: a name moved to another address (a load balancer replaced) is seen
// within that second. Failures are not kept.
import dns from 'node:dns';
import type net from 'node:net';
import { monotonicMs } from '../core/clock.js';

/** How long an answer serves the look-ups of the same name that follow. */
export const ANSWER_KEPT_MS = 1_000;

type Answer = { err: NodeJS.ErrnoException | null; addresses: dns.LookupAddress[] };
type Resolve = (hostname: string, options: dns.LookupAllOptions, cb: (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void) => void;

/** A net.LookupFunction sharing look-ups of one name (per family and hints) as above. */
export function sharedLookup(resolve: Resolve = (h, o, cb) => dns.lookup(h, o, cb)): net.LookupFunction {
  const kept = new Map<string, { at: number; answer: Answer }>();
  const waiting = new Map<string, Array<(answer: Answer) => void>>();
  return ((hostname: string, options: dns.LookupOptions, callback: (...args: unknown[]) => void) => {
    const family = typeof options.family === 'number' ? options.family : options.family === 'IPv6' ? 6 : options.family === 'IPv4' ? 4 : 0;
    const key = `${family}/${options.hints ?? 0}/${hostname}`;
    const reply = ({ err, addresses }: Answer) => {
      if (err) return callback(err);
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0]?.address, addresses[0]?.family);
    };
    const hit = kept.get(key);
    if (hit && monotonicMs() - hit.at < ANSWER_KEPT_MS) return void process.nextTick(reply, hit.answer);
    kept.delete(key);
    const queue = waiting.get(key);
    if (queue) return void queue.push(reply);
    waiting.set(key, [reply]);
    const settle = (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => {
      const answer: Answer = { err, addresses: err ? [] : addresses };
      if (!err) kept.set(key, { at: monotonicMs(), answer });
      const replies = waiting.get(key) ?? [];
      waiting.delete(key);
      for (const r of replies) r(answer);
    };
    try {
      resolve(hostname, { family, hints: options.hints, all: true }, settle);
    } catch (err) {
      // A name dns.lookup refuses outright: its waiters are answered, none is left waiting.
      waiting.delete(key);
      throw err;
    }
  }) as net.LookupFunction;
}
