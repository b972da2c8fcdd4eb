// Name look-ups of the direct route leave libuv's slow-work threads (2 with the default pool) to
// the other routes: a resolver that never answers held both with two names a browser asked for,
// and a cluster route's next tunnel (its API server's name) waited behind them past the connect
// timeout. A look-up queued behind the slot whose stream was given up never starts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type dns from 'node:dns';
import { DirectRoute } from '../../src/routes/direct/route.js';
import { DIRECT_LOOKUPS, LookupSlots } from '../../src/routes/direct/lookup-slots.js';
import { ConnectTimeoutError } from '../../src/core/errors.js';

type Callback = (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void;

test('direct look-ups take one slow-work thread of the default pool; a given-up one never starts', async () => {
  assert.equal(process.env.UV_THREADPOOL_SIZE, undefined, 'run with the default threadpool');
  assert.equal(DIRECT_LOOKUPS.slots, 1);
  const started: string[] = [];
  const pending: Callback[] = [];
  // A resolver that never answers until the test lets it fail.
  const lookup = (host: string, cb: Callback) => {
    started.push(host);
    pending.push(cb);
  };
  // The OS resolver's turns (DIRECT_LOOKUPS), for a resolver of the test's own.
  const route = new DirectRoute('direct', { ownListeners: () => [], lookup, lookupSlots: new LookupSlots(DIRECT_LOOKUPS.slots) });
  const controllers = Array.from({ length: 4 }, () => new AbortController());
  const dials = controllers.map((c, i) => route.dial(`host${i}.stall.test`, 80, c.signal).catch((err: Error) => err));
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(started, ['host0.stall.test'], 'look-ups in flight at once');
  // host1's client gave up while it waited: it must not take the slot when host0's look-up ends.
  controllers[1]!.abort();
  pending.shift()!(Object.assign(new Error('getaddrinfo EAI_AGAIN host0.stall.test'), { code: 'EAI_AGAIN' }), []);
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(started, ['host0.stall.test', 'host2.stall.test']);
  for (const c of controllers) c.abort();
  while (pending.length) pending.shift()!(Object.assign(new Error('EAI_AGAIN'), { code: 'EAI_AGAIN' }), []);
  await Promise.all(dials);
});

test('a dial timed out in its look-up says so: waiting its turn, or unanswered by the resolver', async () => {
  const pending: Callback[] = [];
  const lookup = (_host: string, cb: Callback) => void pending.push(cb);
  const route = new DirectRoute('direct', { ownListeners: () => [], lookup, lookupSlots: new LookupSlots(1) });
  const timeout = () => new DOMException('deadline', 'TimeoutError');
  const slow = new AbortController();
  const queued = new AbortController();
  const first = route.dial('slow.stall.test', 443, slow.signal).catch((err: Error) => err);
  const second = route.dial('next.stall.test', 443, queued.signal).catch((err: Error) => err);
  await new Promise((r) => setTimeout(r, 50));
  queued.abort(timeout());
  slow.abort(timeout());
  const [a, b] = await Promise.all([first, second]);
  assert.ok(a instanceof ConnectTimeoutError && b instanceof ConnectTimeoutError);
  assert.equal(a.message, 'connecting to slow.stall.test:443 timed out: the OS resolver did not answer the look-up of slow.stall.test');
  assert.equal(
    b.message,
    'connecting to next.stall.test:443 timed out: the look-up of next.stall.test waited its turn behind 1 the OS resolver had not answered ' +
      '(the direct route looks up 1 name at once; a larger UV_THREADPOOL_SIZE allows more)',
  );
  for (const cb of pending) cb(Object.assign(new Error('EAI_AGAIN'), { code: 'EAI_AGAIN' }), []);
});
