import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FailedAuthThrottle } from '../../src/auth/throttle.js';

test('per address: at most maxPending wrong answers wait; each is answered after the delay, then the address is admitted again', async () => {
  const t = new FailedAuthThrottle({ delayMs: 50, maxPendingPerAddress: 2 });
  const answered: string[] = [];
  assert.ok(t.admits('10.0.0.1'));
  t.delayFailure('10.0.0.1', () => answered.push('a'));
  t.delayFailure('10.0.0.1', () => answered.push('b'));
  assert.equal(t.admits('10.0.0.1'), false, 'two waiting: refused unchecked');
  assert.ok(t.admits('10.0.0.2'), 'other addresses have their own budget');
  assert.deepEqual(answered, [], 'nothing answered before the delay');
  await new Promise((r) => setTimeout(r, 80));
  assert.deepEqual(answered, ['a', 'b']);
  assert.ok(t.admits('10.0.0.1'));
});
