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
    onMajor: undefined as (() => void) | undefined,
    timers: [] as Array<{ fn: () => void; at: number; cancelled: boolean }>,
  };
  const hooks: GcGuardHooks = {
    setV8Flags: (flags) => state.flags.push(flags),
    collectGarbage: () => state.collections++,
    now: () => state.now,
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
    state.now = t;
    state.onMajor?.();
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
  // Collections from before the hold do not count towards the next engagement.
  for (const t of [30_100, 30_200, 30_300, 30_400]) majorGcAt(t);
  assert.equal(guard.engaged, false);
  majorGcAt(30_500);
  assert.equal(guard.engaged, true);
  assert.equal(guard.engagements, 2);
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
        realGcHooks.observeMajorGcs(() => {
          majors++;
          onMajor();
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
