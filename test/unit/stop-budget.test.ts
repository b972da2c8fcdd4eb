// The two sides of a managed daemon's stop agree (src/managed/stop-budget.ts): the daemon's own
// deadlines fall inside the time disconnect and quit give it before SIGKILL, and never cut the
// listeners' grace short.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CONTROL_CLOSE_MS, settlesBy, shutdownPlan, termWaitMs } from '../../src/managed/stop-budget.js';

test('for any grace: the whole grace and time for the routes, then the control socket, then the lock, all before the kill', () => {
  const seenAt = 1_700_000_000_000;
  for (const grace of [0, 1, 250, 4_000, 4_500, 5_000, 10_000, 60_000, 3_600_000]) {
    const plan = shutdownPlan(grace, seenAt);
    const killAt = seenAt + termWaitMs(grace);
    assert.ok(plan.drainUntil >= seenAt + grace + 300, `grace ${grace}: the routes get time after the listeners' grace`);
    assert.ok(plan.drainUntil + CONTROL_CLOSE_MS < plan.lockUntil, `grace ${grace}: the control socket closes before the lock's deadline`);
    assert.ok(plan.lockUntil <= killAt - 250, `grace ${grace}: no lock is taken in the last 250 ms before the kill`);
  }
  assert.equal(termWaitMs(4_000), 5_000, "connect's default grace: SIGKILL after 5 s, as documented");
  assert.equal(termWaitMs(30_000), 31_000, 'a longer grace: a second more');
});

test('settlesBy: true when the work settles in time (a failure too), false at the deadline', async () => {
  assert.equal(await settlesBy(Date.now() + 5_000, Promise.resolve(1)), true);
  assert.equal(await settlesBy(Date.now() + 5_000, Promise.reject(new Error('ignored'))), true);
  assert.equal(await settlesBy(Date.now() + 5_000, undefined), true, 'nothing to wait for');
  assert.equal(await settlesBy(Date.now() + 50, new Promise(() => undefined)), false);
  assert.equal(await settlesBy(Date.now() - 1, new Promise(() => undefined)), false, 'past its deadline: not waited for');
});
