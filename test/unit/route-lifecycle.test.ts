// routes/guest-cluster/lifecycle.ts: what a stream meets while its route starts, fails and tries again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConnectTimeoutError, RouteUnavailableError } from '../../src/core/errors.js';
import { createLogger } from '../../src/core/log.js';
import { RETRY_MIN_MS, RouteLifecycle, TEST_RETRY_ENV } from '../../src/routes/guest-cluster/lifecycle.js';

/** A route whose attempts the test settles (attempts[i].succeed / fail), started. */
function drivenRoute(name: string) {
  const attempts: Array<{ fail: (err: Error) => void; succeed: () => void }> = [];
  const life = new RouteLifecycle('cluster', name, createLogger('silent'), {
    connect: () => new Promise<void>((succeed, fail) => attempts.push({ succeed, fail })),
    reset: async () => {},
  });
  const started = life.start();
  started.catch(() => undefined);
  return { life, attempts, started };
}

test(
  'a route that has failed answers "not available" at once, also while its next attempt runs; on its first start a stream waits',
  { timeout: 10_000 },
  async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { life, attempts, started } = drivenRoute('prod');
    // First start: a stream waits, and the connect timeout running out is a timeout.
    const timeout = new AbortController();
    const waiting = life.whenReady(timeout.signal);
    timeout.abort(new DOMException('timed out', 'TimeoutError'));
    await assert.rejects(waiting, ConnectTimeoutError);
    attempts[0]!.fail(new Error('cannot reach the API server'));
    await assert.rejects(started);
    assert.equal(life.state, 'error');
    await assert.rejects(life.whenReady(new AbortController().signal), RouteUnavailableError);
    // The retry runs: still down for streams, at once (no wait for the attempt under way).
    t.mock.timers.tick(RETRY_MIN_MS);
    await new Promise((r) => setImmediate(r));
    assert.equal(attempts.length, 2);
    assert.equal(life.state, 'starting');
    await assert.rejects(
      life.whenReady(new AbortController().signal),
      (err: Error) => err instanceof RouteUnavailableError && /cannot reach the API server/.test(err.message),
    );
    attempts[1]!.succeed();
    await new Promise((r) => setImmediate(r));
    assert.equal(life.state, 'ready');
    await life.whenReady(new AbortController().signal);
    life.close();
  },
);

test('the retry delay test hook: the option, then the environment variable (whole milliseconds only), else 5 s', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const saved = process.env[TEST_RETRY_ENV];
  t.after(() => (saved === undefined ? delete process.env[TEST_RETRY_ENV] : (process.env[TEST_RETRY_ENV] = saved)));
  /** How many attempts have run `ms` after a failed first start. */
  const attemptsAfter = async (ms: number, timing?: { retryMinMs?: number }): Promise<number> => {
    let attempts = 0;
    const life = new RouteLifecycle(
      'cluster',
      'prod',
      createLogger('silent'),
      {
        connect: async () => {
          attempts++;
          throw new Error('down');
        },
        reset: async () => {},
      },
      timing,
    );
    await assert.rejects(life.start());
    t.mock.timers.tick(ms);
    await new Promise((r) => setImmediate(r));
    life.close();
    return attempts;
  };
  delete process.env[TEST_RETRY_ENV];
  assert.equal(await attemptsAfter(RETRY_MIN_MS - 1), 1, 'the product: 5 s');
  assert.equal(await attemptsAfter(300, { retryMinMs: 300 }), 2, 'the option');
  process.env[TEST_RETRY_ENV] = '200';
  assert.equal(await attemptsAfter(200), 2, 'the variable');
  assert.equal(await attemptsAfter(250, { retryMinMs: 300 }), 1, 'the option before the variable');
  for (const ignored of ['0', '-1', '1.5', '2e3', 'soon', '']) {
    process.env[TEST_RETRY_ENV] = ignored;
    assert.equal(await attemptsAfter(RETRY_MIN_MS - 1), 1, `${JSON.stringify(ignored)} is ignored`);
  }
});

test('whenSettled: pending while the first attempt runs; resolves when it succeeds or fails, nothing to wait for after', async () => {
  const { life, attempts } = drivenRoute('prod');
  let settled = false;
  const settling = life.whenSettled(new AbortController().signal)!.then(() => (settled = true));
  await new Promise((r) => setImmediate(r));
  assert.equal(settled, false, 'the first attempt still runs');
  attempts[0]!.fail(new Error('cannot reach the API server'));
  await settling;
  assert.equal(life.whenSettled(new AbortController().signal), undefined, 'failed: settled, retries or not');
  const other = drivenRoute('staging');
  const waiting = new AbortController();
  const aborted = other.life.whenSettled(waiting.signal);
  waiting.abort(new Error('client left'));
  await assert.rejects(aborted!, /client left/);
  other.attempts[0]!.succeed();
  await new Promise((r) => setImmediate(r));
  assert.equal(other.life.state, 'ready');
  assert.equal(other.life.whenSettled(new AbortController().signal), undefined, 'ready: settled');
  life.close();
  other.life.close();
});
