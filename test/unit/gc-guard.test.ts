import { test } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import vm from 'node:vm';
import { MarkingThrashGuard, realGcHooks, startGcGuard, type GcGuardHooks } from '../../src/core/gc-guard.js';
import { createLogger } from '../../src/core/log.js';

const log = createLogger('silent');

function fakeHooks() {
  const state = {
    now: 0,
    flags: [] as string[],
    collections: 0,
    onMajor: undefined as ((startedAt: number) => void) | undefined,
    timers: [] as Array<{ fn: () => void; at: number; cancelled: boolean }>,
  };
  const hooks: GcGuardHooks = {
    setV8Flags: (flags) => state.flags.push(flags),
    collectGarbage: () => state.collections++,
    observeMajorGcs(onMajor) {
      state.onMajor = onMajor;
      return () => (state.onMajor = undefined);
    },
    setTimer(fn, ms) {
      const timer = { fn, at: state.now + ms, cancelled: false };
      state.timers.push(timer);
      return { cancel: () => (timer.cancelled = true) };
    },
  };
  const majorGcAt = (t: number) => {
    state.now = Math.max(state.now, t);
    state.onMajor?.(t);
  };
  const advanceTo = (t: number) => {
    state.now = t;
    for (const timer of state.timers) {
      if (!timer.cancelled && timer.at <= t) {
        timer.cancelled = true;
        timer.fn();
      }
    }
  };
  return { state, hooks, majorGcAt, advanceTo };
}

const options = { threshold: 5, windowMs: 1_000, holdMs: 30_000 };

test('five major collections within a second turn incremental marking off; four do not', () => {
  const { state, hooks, majorGcAt } = fakeHooks();
  const guard = new MarkingThrashGuard(log, options, hooks).start();
  for (const t of [0, 200, 400, 600]) majorGcAt(t);
  assert.deepEqual(state.flags, [], 'four in a second is not thrashing');
  majorGcAt(800);
  assert.deepEqual(state.flags, ['--no-incremental-marking']);
  assert.equal(guard.engaged, true);
  assert.equal(guard.engagements, 1);
  // More collections while held change nothing.
  for (const t of [900, 950, 1000, 1050, 1100, 1150]) majorGcAt(t);
  assert.deepEqual(state.flags, ['--no-incremental-marking']);
});

test('the window is measured between the collections themselves, its end included', () => {
  const { state, hooks, majorGcAt } = fakeHooks();
  new MarkingThrashGuard(log, options, hooks).start();
  // Delivered together (a busy event loop batches gc entries), but run 800 ms apart.
  for (const t of [0, 800, 1600, 2400, 3200]) majorGcAt(t);
  assert.deepEqual(state.flags, [], 'five collections over 3.2 s are not thrashing, however they arrive');
  // Exactly one window from the first of five to the last still counts.
  for (const t of [10_000, 10_250, 10_500, 10_750, 11_000]) majorGcAt(t);
  assert.deepEqual(state.flags, ['--no-incremental-marking']);
});

test('major collections spread wider than the window never engage the guard', () => {
  const { state, hooks, majorGcAt } = fakeHooks();
  new MarkingThrashGuard(log, options, hooks).start();
  // One every 260 ms: any five span 1,040 ms.
  for (let i = 0; i < 50; i++) majorGcAt(i * 260);
  assert.deepEqual(state.flags, []);
});

test('after the hold, incremental marking comes back on, and thrashing again turns it off again', () => {
  const { state, hooks, majorGcAt, advanceTo } = fakeHooks();
  const guard = new MarkingThrashGuard(log, options, hooks).start();
  for (const t of [0, 10, 20, 30, 40]) majorGcAt(t);
  advanceTo(30_039);
  assert.equal(guard.engaged, true, 'still held just before the hold ends');
  advanceTo(30_040);
  assert.equal(guard.engaged, false);
  assert.deepEqual(state.flags, ['--no-incremental-marking', '--incremental-marking']);
  assert.equal(state.collections, 1, 'one full collection after the hold (it arms the memory reducer)');
  for (const t of [30_100, 30_200, 30_300, 30_400]) majorGcAt(t);
  assert.equal(guard.engaged, false);
  majorGcAt(30_500);
  assert.equal(guard.engaged, true);
  assert.equal(guard.engagements, 2);
});

test('collections from before a hold do not count towards the next engagement', () => {
  const { state, hooks, majorGcAt, advanceTo } = fakeHooks();
  // A hold shorter than the window: the collections that engaged it would still be in it.
  const guard = new MarkingThrashGuard(log, { threshold: 5, windowMs: 1_000, holdMs: 100 }, hooks).start();
  for (const t of [0, 10, 20, 30, 40]) majorGcAt(t);
  advanceTo(140);
  assert.equal(guard.engaged, false);
  majorGcAt(150);
  assert.equal(guard.engaged, false, 'one collection after the hold, not six');
  assert.deepEqual(state.flags, ['--no-incremental-marking', '--incremental-marking']);
});

test('stop gives V8 its default back and stops watching', () => {
  const { state, hooks, majorGcAt } = fakeHooks();
  const guard = new MarkingThrashGuard(log, options, hooks).start();
  for (const t of [0, 10, 20, 30, 40]) majorGcAt(t);
  guard.stop();
  assert.deepEqual(state.flags, ['--no-incremental-marking', '--incremental-marking']);
  assert.equal(state.onMajor, undefined);
  assert.equal(state.timers[0]!.cancelled, true, 'the hold timer is gone');
  assert.equal(state.collections, 0, 'no collection on the way out');
  // Stopping a guard that never engaged touches no flag.
  const other = fakeHooks();
  new MarkingThrashGuard(log, options, other.hooks).start().stop();
  assert.deepEqual(other.state.flags, []);
});

test('a process started with an explicit incremental-marking flag keeps it: no guard', () => {
  assert.equal(startGcGuard(log, ['--no-incremental-marking']), undefined);
  assert.equal(startGcGuard(log, ['--max-old-space-size=512', '--incremental_marking']), undefined);
  assert.equal(startGcGuard(log, ['--noincremental-marking']), undefined, "V8's own negation");
  const guard = startGcGuard(log, ['--max-old-space-size=512']);
  assert.ok(guard instanceof MarkingThrashGuard);
  guard.stop();
});

test("the real hooks see this process's major collections, set V8's flag and collect", async () => {
  // gc() is not exposed to tests; this is how Node lets a running process expose it.
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const flags: string[] = [];
  let majors = 0;
  const settle = async (done: () => boolean) => {
    // perf_hooks delivers gc entries asynchronously.
    for (let i = 0; i < 50 && !done(); i++) await new Promise((r) => setTimeout(r, 20));
  };
  const guard = new MarkingThrashGuard(
    log,
    { threshold: 3, windowMs: 60_000, holdMs: 60_000 },
    {
      ...realGcHooks,
      setV8Flags: (f) => {
        flags.push(f);
        realGcHooks.setV8Flags(f);
      },
      observeMajorGcs: (onMajor) =>
        realGcHooks.observeMajorGcs((startedAt) => {
          majors++;
          onMajor(startedAt);
        }),
    },
  ).start();
  gc();
  gc();
  await settle(() => majors >= 2);
  assert.equal(majors, 2);
  assert.deepEqual(flags, [], 'two collections are not enough');
  gc();
  await settle(() => flags.length > 0);
  assert.deepEqual(flags, ['--no-incremental-marking']);
  // The guard's own collection (what it asks for after a hold) is a major one.
  realGcHooks.collectGarbage();
  await settle(() => majors >= 4);
  assert.equal(majors, 4);
  guard.stop();
  assert.deepEqual(flags, ['--no-incremental-marking', '--incremental-marking']);
});

test('the real observer times collections by when they ran, not by when their entries arrive', async () => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const flags: string[] = [];
  let majors = 0;
  const guard = new MarkingThrashGuard(
    log,
    { threshold: 3, windowMs: 150, holdMs: 60_000 },
    {
      ...realGcHooks,
      setV8Flags: (f) => flags.push(f),
      observeMajorGcs: (onMajor) =>
        realGcHooks.observeMajorGcs((startedAt) => {
          majors++;
          onMajor(startedAt);
        }),
    },
  ).start();
  const busy = (ms: number) => {
    const until = performance.now() + ms;
    while (performance.now() < until);
  };
  // Three collections 300 ms apart in one turn of the event loop: their entries arrive together.
  gc();
  busy(300);
  gc();
  busy(300);
  gc();
  for (let i = 0; i < 50 && majors < 3; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(majors, 3);
  assert.deepEqual(flags, [], '600 ms apart is not within 150 ms');
  gc();
  gc();
  gc();
  for (let i = 0; i < 50 && majors < 6; i++) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(flags, ['--no-incremental-marking'], 'back to back is');
  guard.stop();
});
