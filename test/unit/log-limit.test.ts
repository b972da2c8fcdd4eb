// RepeatedLineLimiter: a burst per key and window, then one "N more like this" summary.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/core/log.js';
import { RepeatedLineLimiter, TEST_WINDOW_ENV } from '../../src/core/log-limit.js';

function capture(): { lines: Array<Record<string, unknown>>; log: ReturnType<typeof createLogger> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({ write: (chunk: Buffer, _enc, cb) => (lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>), cb()) });
  return { lines, log: createLogger('info', sink) };
}

const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('per key: the burst is written, the rest counted and summarised once when the window ends', async () => {
  const { lines, log } = capture();
  const limiter = new RepeatedLineLimiter(log, { windowMs: 150, burst: 3, maxKeys: 10 });
  const written = [];
  for (let i = 0; i < 10; i++) written.push(limiter.write('warn', 'auth-failed|loopback', { reason: 'auth-failed', n: i }, `stream failed ${i}`));
  assert.deepEqual(written, [true, true, true, false, false, false, false, false, false, false]);
  assert.ok(limiter.write('warn', 'not-allowed|loopback', { reason: 'not-allowed' }, 'other kind'), 'another key has its own burst');
  await settle(20);
  assert.deepEqual(
    lines.map((l) => l.msg),
    ['stream failed 0', 'stream failed 1', 'stream failed 2', 'other kind'],
  );
  await settle(250);
  const summary = lines.at(-1)!;
  assert.equal(summary.msg, '7 more like this in 0.2 s, the last: stream failed 9');
  assert.equal(summary.suppressed, 7);
  assert.equal(summary.n, 9, "the summary carries the last line's fields");
  assert.equal(summary.level, 40, "at the lines' level");
  assert.equal(lines.length, 5, 'one summary only; the key without suppressed lines writes none');
  // A new window starts afresh.
  assert.ok(limiter.write('warn', 'auth-failed|loopback', {}, 'again'));
});

test('keys beyond maxKeys share one window, so memory stays bounded', async () => {
  const { lines, log } = capture();
  const limiter = new RepeatedLineLimiter(log, { windowMs: 60_000, burst: 1, maxKeys: 2 });
  const written = ['a', 'b', 'c', 'd', 'e'].map((k) => limiter.write('info', k, {}, k));
  assert.deepEqual(written, [true, true, true, false, false], 'c opens the shared window; d and e count against it');
  limiter.flush();
  await settle(20);
  // Flushed at once (a stop): the window ran for no time yet, not its 60 s.
  assert.equal(lines.at(-1)!.msg, '2 more like this in 0 s, the last: e');
});

test('the window test hook: the environment variable (whole milliseconds only) sets the default window, else 10 s', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const saved = process.env[TEST_WINDOW_ENV];
  t.after(() => (saved === undefined ? delete process.env[TEST_WINDOW_ENV] : (process.env[TEST_WINDOW_ENV] = saved)));
  /** Whether the summary of a flood past the burst is out `ms` after its first line. */
  const summarisedAfter = (ms: number): boolean => {
    const { lines, log } = capture();
    const limiter = new RepeatedLineLimiter(log);
    for (let i = 0; i < 30; i++) limiter.write('warn', 'auth-failed|loopback', {}, 'stream failed');
    t.mock.timers.tick(ms);
    return lines.some((l) => l.suppressed !== undefined);
  };
  delete process.env[TEST_WINDOW_ENV];
  assert.equal(summarisedAfter(9_999), false, 'the product: 10 s');
  process.env[TEST_WINDOW_ENV] = '500';
  assert.equal(summarisedAfter(500), true, 'the variable');
  for (const ignored of ['0', '-1', '1.5', '2e3', 'soon', '']) {
    process.env[TEST_WINDOW_ENV] = ignored;
    assert.equal(summarisedAfter(9_999), false, `${JSON.stringify(ignored)} is ignored`);
  }
});
