// routes/lifecycle.ts: what a stream meets while its route starts, fails and tries again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConnectTimeoutError, RouteUnavailableError } from '../../src/core/errors.js';
import { createLogger } from '../../src/core/log.js';
import { RETRY_MIN_MS, RouteLifecycle } from '../../src/routes/lifecycle.js';

test('a route that has failed answers "not available" at once, also while its next attempt runs; on its first start a stream waits', { timeout: 10_000 }, async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const attempts: Array<{ fail: (err: Error) => void; succeed: () => void }> = [];
  const life = new RouteLifecycle('cluster', 'prod', createLogger('silent'), {
    connect: () => new Promise<void>((succeed, fail) => attempts.push({ succeed, fail })),
    reset: async () => {},
  });
  const started = life.start();
  started.catch(() => undefined);
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
  await assert.rejects(life.whenReady(new AbortController().signal), (err: Error) => err instanceof RouteUnavailableError && /cannot reach the API server/.test(err.message));
  attempts[1]!.succeed();
  await new Promise((r) => setImmediate(r));
  assert.equal(life.state, 'ready');
  await life.whenReady(new AbortController().signal);
  life.close();
});
