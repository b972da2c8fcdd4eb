// spdy/reply-watch.ts: a tunnel is suspect only when a whole window passes without any SYN_REPLY
// or any byte heard while streams wait; replies or bytes keep it quiet, and streams opened later
// get a window of their own.
// Mocked timers: the windows are counted, not waited.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ReplyWatch } from '../../src/tunnel/spdy/reply-watch.js';

test('no reply in a window while a stream waits: suspect once', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  let silent = 0;
  const heard = 0;
  const watch = new ReplyWatch(
    () => silent++,
    () => heard,
    100,
  );
  watch.opened();
  t.mock.timers.tick(99);
  assert.equal(silent, 0);
  t.mock.timers.tick(1);
  assert.equal(silent, 1);
  t.mock.timers.tick(1_000);
  assert.equal(silent, 1, 'once: the pool checks the tunnel then');
});

test('replies in each window: never suspect; a stream opened after the last reply is watched again', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  let silent = 0;
  const heard = 0;
  const watch = new ReplyWatch(
    () => silent++,
    () => heard,
    100,
  );
  watch.opened();
  watch.replied();
  watch.replied();
  t.mock.timers.tick(150); // window 1 saw replies and no later open: the watch stops
  assert.equal(silent, 0);
  watch.opened(); // window 2: 150–250
  t.mock.timers.tick(50);
  watch.opened(); // opened inside window 2, which gets a reply
  watch.replied();
  t.mock.timers.tick(50);
  assert.equal(silent, 0);
  t.mock.timers.tick(99); // window 3 (250–350), for the second stream: no reply comes
  assert.equal(silent, 0);
  t.mock.timers.tick(1);
  assert.equal(silent, 1);
});

test('stop() ends the watch: a closed tunnel is not reported', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  let silent = 0;
  const heard = 0;
  const watch = new ReplyWatch(
    () => silent++,
    () => heard,
    100,
  );
  watch.opened();
  watch.stop();
  t.mock.timers.tick(500);
  assert.equal(silent, 0);
});

test('bytes heard without a reply (replies queued behind a busy download): not suspect, watched on until quiet', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  let silent = 0;
  let heard = 0;
  const watch = new ReplyWatch(
    () => silent++,
    () => heard,
    100,
  );
  watch.opened();
  heard += 16_384;
  t.mock.timers.tick(100);
  assert.equal(silent, 0, 'the path is alive');
  heard += 16_384;
  t.mock.timers.tick(100);
  assert.equal(silent, 0);
  // The download stops and the reply never comes: the next window is silent.
  t.mock.timers.tick(100);
  assert.equal(silent, 1);
});
