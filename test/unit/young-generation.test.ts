// The young-generation hold during a cache's (re)list (core/young-generation.ts): counted across
// informers, released when the objects are in, when the list fails and when the informer stops.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import { YoungGenerationHold, youngGenerationHold } from '../../src/core/young-generation.js';
import { ResilientInformer } from '../../src/cluster/informer.js';
import { slimService } from '../../src/cluster/slim.js';
import { createLogger } from '../../src/core/log.js';
import { sendStatus, startFakeApi } from '../helpers/fake-api.js';

function recorded(sizedByUser = false) {
  const flags: string[] = [];
  return { flags, hold: new YoungGenerationHold({ setV8Flags: (f) => void flags.push(f), sizedByUser: () => sizedByUser }) };
}

test('the first hold sets the growth factor to 1, the last release sets V8 default back; a second release is ignored', () => {
  const { flags, hold } = recorded();
  const a = hold.hold();
  const b = hold.hold();
  assert.deepEqual(flags, ['--semi-space-growth-factor=1']);
  a();
  a();
  assert.equal(hold.held, true, 'b still holds');
  assert.deepEqual(flags, ['--semi-space-growth-factor=1']);
  b();
  assert.equal(hold.held, false);
  assert.deepEqual(flags, ['--semi-space-growth-factor=1', '--semi-space-growth-factor=2']);
});

test('a node started with its own semi-space flags keeps them: no flag is set', () => {
  const { flags, hold } = recorded(true);
  hold.hold()();
  assert.deepEqual(flags, []);
  assert.equal(hold.held, false);
});

test('in this process the flag really keeps the young generation from growing while held', () => {
  // Fresh objects kept alive (a sync's survival pattern) grow new space when not held.
  const newSpace = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_size;
  const release = youngGenerationHold.hold();
  const before = newSpace();
  const kept: object[] = [];
  try {
    for (let i = 0; i < 200_000; i++) kept.push({ name: `pod-${i}`, ip: [i, i + 1] });
    assert.ok(newSpace() <= before, `new space grew from ${before} to ${newSpace()} bytes while held`);
  } finally {
    release();
  }
  assert.equal(kept.length, 200_000);
});

const serviceList = JSON.stringify({
  metadata: { resourceVersion: '10' },
  items: [{ metadata: { namespace: 'a', name: 's', resourceVersion: '9' }, spec: { ports: [] } }],
});

test('an informer holds while it lists and lets go once the list is in, when the list fails, and when stopped', async (t) => {
  let failLists = true;
  let watches = 0;
  const heldDuringLists: boolean[] = [];
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    if (url.searchParams.get('watch')) {
      watches++;
      return void res.writeHead(200, { 'Content-Type': 'application/json' }).flushHeaders();
    }
    heldDuringLists.push(youngGenerationHold.held);
    if (failLists) return sendStatus(res, 500, 'etcd unavailable');
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(serviceList);
  });
  t.after(() => fake.close());
  const informer = new ResilientInformer(fake.api, '/api/v1/services', createLogger('silent'), () => undefined, slimService);
  const synced = informer.start();
  // The first list fails (500): released while the informer waits for its retry.
  for (let i = 0; i < 100 && fake.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(youngGenerationHold.held, false, 'released after a failed list');
  failLists = false;
  await synced;
  assert.equal(youngGenerationHold.held, false, 'released once the objects are in');
  for (let i = 0; i < 200 && watches === 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(watches, 1, 'it watches on (no hold while watching)');
  await informer.stop();
  assert.equal(youngGenerationHold.held, false);
  assert.ok(heldDuringLists.length >= 2);
  assert.ok(heldDuringLists.every(Boolean), 'held while each list was asked for');
});
