// What a managed daemon keeps of the caller's NODE_OPTIONS (everything but a debugger), and its threadpool.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { daemonEnv, withoutInspector } from '../../src/managed/daemon-env.js';
import { threadpoolSize } from '../../src/core/threadpool.js';

test('inspector flags are dropped from NODE_OPTIONS, the rest kept', () => {
  assert.equal(withoutInspector('--inspect'), undefined);
  assert.equal(withoutInspector('--inspect-brk=0.0.0.0:9229  --max-old-space-size=512'), '--max-old-space-size=512');
  assert.equal(withoutInspector('--use-openssl-ca --inspect-wait --debug=5858'), '--use-openssl-ca');
  assert.equal(withoutInspector('--inspect-port=9230 --enable-source-maps'), '--enable-source-maps');
  assert.equal(withoutInspector('--require ./trace.js'), '--require ./trace.js');
  assert.equal(withoutInspector(undefined), undefined);
  // Node reads `_` as `-` in option names: these open the inspector too.
  assert.equal(withoutInspector('--inspect_brk=0.0.0.0:9229 --max_old_space_size=512'), '--max_old_space_size=512');
  assert.equal(withoutInspector('--inspect_wait --enable-source-maps'), '--enable-source-maps');
  // A port given as the next word goes with its flag.
  assert.equal(withoutInspector('--inspect-port 9230 --inspect --enable-source-maps'), '--enable-source-maps');
  const env = daemonEnv({ NODE_OPTIONS: '--inspect', PATH: '/bin' }, { EXTRA: 'x' });
  assert.equal(env.NODE_OPTIONS, undefined);
  assert.equal(env.PATH, '/bin');
  assert.equal(env.EXTRA, 'x');
});

test("a daemon's threadpool is the caller's size when given; else its bin script sizes it, with no variable left for its children", () => {
  assert.equal('UV_THREADPOOL_SIZE' in daemonEnv({}, {}), false);
  assert.equal(daemonEnv({ UV_THREADPOOL_SIZE: '4' }, {}).UV_THREADPOOL_SIZE, '4');
});

test("on Windows a daemon is started with its threadpool's size, which no process can set for itself there", () => {
  assert.equal('UV_THREADPOOL_SIZE' in daemonEnv({}, {}, 'linux'), false);
  assert.equal(daemonEnv({}, {}, 'win32').UV_THREADPOOL_SIZE, '16');
  assert.equal(daemonEnv({ UV_THREADPOOL_SIZE: '4' }, {}, 'win32').UV_THREADPOOL_SIZE, '4');
  // A size the bin script claims it set is not believed on Windows (libuv reads the C runtime's environment).
  const g = globalThis as { __proxyoutThreadpool?: number };
  const before = g.__proxyoutThreadpool;
  g.__proxyoutThreadpool = 16;
  try {
    assert.equal(threadpoolSize('linux'), 16);
    assert.equal(threadpoolSize('win32'), Number(process.env.UV_THREADPOOL_SIZE ?? 4));
  } finally {
    g.__proxyoutThreadpool = before;
  }
});
