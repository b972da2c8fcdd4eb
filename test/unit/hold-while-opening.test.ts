import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { holdWhileOpening } from '../../src/listeners/server-base.js';
import { socketPair } from '../helpers/socket-pair.js';

test('bytes a client sends while its stream opens are kept and handed over; the socket is left paused', async () => {
  const p = await socketPair();
  let goneCalls = 0;
  const held = holdWhileOpening(p.inner, () => goneCalls++);
  p.outer.write('GET / HTTP/1.1\r\n');
  await once(p.inner, 'data');
  p.outer.write('Host: x\r\n\r\n');
  await once(p.inner, 'data');
  assert.equal(held.gone, false);
  assert.equal(held.release().toString(), 'GET / HTTP/1.1\r\nHost: x\r\n\r\n');
  assert.equal(p.inner.isPaused(), true);
  assert.equal(p.inner.listenerCount('data'), 0);
  assert.equal(goneCalls, 0);
  p.outer.destroy();
  p.inner.destroy();
  p.close();
});

test('a FIN while opening counts as leaving, once; with finIsGone false only a close does', async () => {
  const p = await socketPair();
  let goneCalls = 0;
  const held = holdWhileOpening(p.inner, () => goneCalls++);
  p.outer.end();
  await once(p.inner, 'end');
  assert.equal(held.gone, true);
  p.inner.destroy();
  await once(p.inner, 'close');
  assert.equal(goneCalls, 1);
  p.close();

  const q = await socketPair();
  const mapping = holdWhileOpening(q.inner, () => goneCalls++, undefined, false);
  q.outer.end('request then FIN');
  await once(q.inner, 'end');
  assert.equal(mapping.gone, false);
  assert.equal(mapping.release().toString(), 'request then FIN');
  q.inner.destroy();
  q.close();
});

test('`gone` is a plain data property, not a getter', async () => {
  // An object literal with `get gone()` is a dictionary-mode object in V8 whose getter pinned the
  // whole connection through every young-generation collection (server-base.ts, docs/performance.md).
  const p = await socketPair();
  const held = holdWhileOpening(p.inner, () => {});
  const own = Object.getOwnPropertyDescriptor(held, 'gone');
  assert.ok(own && 'value' in own && own.get === undefined, 'gone must be an own data property');
  held.release();
  p.outer.destroy();
  p.inner.destroy();
  p.close();
});
