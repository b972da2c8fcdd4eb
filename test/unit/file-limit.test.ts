// proxy/file-limit.ts: the open-file limit as procfs says it (Linux) and as a child shell says it
// (macOS, where there is no procfs), and what fits in it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { clientsWithin, openFileLimit, streamsWithin } from '../../src/proxy/file-limit.js';

test('both ways of reading the limit agree with the shell', { skip: process.platform === 'win32' && 'no ulimit' }, async () => {
  const shell = Number(execFileSync('/bin/sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim());
  assert.equal(await openFileLimit('darwin'), shell);
  if (process.platform === 'linux') assert.equal(await openFileLimit('linux'), shell);
  assert.equal(await openFileLimit('win32'), undefined);
});

test('streams and clients fit with files kept back, at any limit', () => {
  assert.deepEqual([streamsWithin(256), clientsWithin(256)], [96, 192]);
  assert.deepEqual([streamsWithin(64), clientsWithin(64)], [16, 32]);
  assert.deepEqual([streamsWithin(1), clientsWithin(1)], [1, 1]);
  assert.ok(streamsWithin(4096) > 1024, 'the default --max-streams fits a common hard limit');
});
