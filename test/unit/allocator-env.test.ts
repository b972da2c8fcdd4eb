// The allocator environment a daemon starts with (src/managed/allocator-env.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { allocatorEnv } from '../../src/managed/allocator-env.js';

test('on Linux a fixed trim threshold, unless the user chose any malloc setting; elsewhere nothing', () => {
  assert.deepEqual(allocatorEnv({}, 'linux'), { MALLOC_TRIM_THRESHOLD_: '1048576' });
  assert.deepEqual(allocatorEnv({ MALLOC_ARENA_MAX: '2' }, 'linux'), {});
  assert.deepEqual(allocatorEnv({ MALLOC_MMAP_THRESHOLD_: '65536' }, 'linux'), {});
  assert.deepEqual(allocatorEnv({ GLIBC_TUNABLES: 'glibc.malloc.trim_threshold=0' }, 'linux'), {});
  assert.deepEqual(allocatorEnv({ GLIBC_TUNABLES: 'glibc.rtld.optional_static_tls=512' }, 'linux'), { MALLOC_TRIM_THRESHOLD_: '1048576' });
  assert.deepEqual(allocatorEnv({}, 'darwin'), {});
  assert.deepEqual(allocatorEnv({}, 'win32'), {});
});
