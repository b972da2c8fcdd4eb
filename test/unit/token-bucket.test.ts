import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TokenBucket } from '../../src/core/token-bucket.js';

test('a burst, then the rate; unused time refills up to the burst only', () => {
  let now = 0;
  const bucket = new TokenBucket({ ratePerSecond: 2, burst: 3 }, () => now);
  const takes = (n: number) => Array.from({ length: n }, () => bucket.take()).filter(Boolean).length;
  assert.equal(takes(10), 3, 'the burst');
  now += 499;
  assert.equal(takes(1), 0, 'not a whole token yet');
  now += 1;
  assert.equal(takes(5), 1, 'one token per 500 ms');
  now += 60_000;
  assert.equal(takes(10), 3, 'a long pause refills the burst, no more');
  now -= 1_000; // a clock that steps back adds nothing
  assert.equal(takes(1), 0);
});
