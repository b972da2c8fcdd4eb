// The API server's name lookups (cluster/shared-lookup.ts): together they are one; a failure is not kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type dns from 'node:dns';
import { sharedLookup } from '../../src/cluster/shared-lookup.js';

type Cb = (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void;

function resolver() {
  const calls: Array<{ host: string; cb: Cb }> = [];
  return { calls, resolve: (host: string, _o: dns.LookupAllOptions, cb: Cb) => void calls.push({ host, cb }) };
}

function ask(lookup: ReturnType<typeof sharedLookup>, host: string, options: dns.LookupOptions): Promise<unknown[]> {
  return new Promise((resolve) => (lookup as unknown as (h: string, o: object, cb: (...a: unknown[]) => void) => void)(host, options, (...a) => resolve(a)));
}

test('look-ups of one name under way together are one, each answered in its own form', async () => {
  const r = resolver();
  const lookup = sharedLookup(r.resolve);
  const all = ask(lookup, 'api.example', { all: true });
  const one = ask(lookup, 'api.example', {});
  const other = ask(lookup, 'other.example', { all: true });
  assert.deepEqual(
    r.calls.map((c) => c.host),
    ['api.example', 'other.example'],
  );
  r.calls[0]!.cb(null, [
    { address: '10.0.0.1', family: 4 },
    { address: 'fd00::1', family: 6 },
  ]);
  r.calls[1]!.cb(null, [{ address: '10.0.0.2', family: 4 }]);
  assert.deepEqual(await all, [
    null,
    [
      { address: '10.0.0.1', family: 4 },
      { address: 'fd00::1', family: 6 },
    ],
  ]);
  assert.deepEqual(await one, [null, '10.0.0.1', 4]);
  assert.deepEqual(await other, [null, [{ address: '10.0.0.2', family: 4 }]]);
  // Just answered: kept for the look-ups that follow.
  assert.deepEqual(await ask(lookup, 'api.example', {}), [null, '10.0.0.1', 4]);
  assert.equal(r.calls.length, 2);
});

test('a failed look-up is not kept: the next one asks again', async () => {
  const r = resolver();
  const lookup = sharedLookup(r.resolve);
  const first = ask(lookup, 'api.example', { all: true });
  r.calls[0]!.cb(Object.assign(new Error('getaddrinfo EAI_AGAIN api.example'), { code: 'EAI_AGAIN' }), []);
  assert.equal(((await first)[0] as NodeJS.ErrnoException).code, 'EAI_AGAIN');
  const second = ask(lookup, 'api.example', { all: true });
  assert.equal(r.calls.length, 2);
  r.calls[1]!.cb(null, [{ address: '10.0.0.1', family: 4 }]);
  assert.deepEqual(await second, [null, [{ address: '10.0.0.1', family: 4 }]]);
});

test('a look-up refused outright (thrown) leaves nothing waiting behind it', async () => {
  let calls = 0;
  const lookup = sharedLookup((_h, _o, cb) => {
    if (++calls === 1) throw new TypeError('invalid hostname');
    cb(null, [{ address: '10.0.0.1', family: 4 }]);
  });
  assert.throws(() => (lookup as unknown as (h: string, o: object, cb: () => void) => void)('bad', {}, () => undefined), TypeError);
  assert.deepEqual(await ask(lookup, 'bad', {}), [null, '10.0.0.1', 4]);
});
