// What status and doctor say of a managed proxy: another version that started it, open streams only when known.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { otherVersion } from '../../src/managed/status.js';
import { statusTable } from '../../src/cli/status-table.js';
import { checkDaemons } from '../../src/doctor/local.js';
import { proxyStatusFixture } from '../helpers/proxy-status.js';

test('a running proxy of another version is named with what to do; this version, dead or elsewhere ones are not', () => {
  assert.deepEqual(otherVersion({ id: 'a1', state: 'running', version: '1.0.0' }, '1.1.0'), {
    started: 'started by kubectl-proxyout 1.0.0, this is 1.1.0',
    fix: 'disconnect a1 and connect it again to run this one',
  });
  assert.match(otherVersion({ id: 'a1', state: 'starting', version: null }, '1.1.0')!.started, /^started by an earlier kubectl-proxyout, this is 1\.1\.0$/);
  assert.equal(otherVersion({ id: 'a1', state: 'running', version: '1.1.0' }, '1.1.0'), undefined);
  assert.equal(otherVersion({ id: 'a1', state: 'dead', version: '1.0.0' }, '1.1.0'), undefined);
  assert.equal(otherVersion({ id: 'a1', state: 'elsewhere', version: '1.0.0' }, '1.1.0'), undefined);
});

test('status prints the line after the table; doctor warns with the fix', () => {
  const rows = [proxyStatusFixture({ id: 'a1', version: '1.0.0' }), proxyStatusFixture({ id: 'b2', version: '1.1.0' })];
  const lines = statusTable(rows, '1.1.0');
  assert.deepEqual(
    lines.filter((l) => l.includes('started by')),
    ['a1: started by kubectl-proxyout 1.0.0, this is 1.1.0; disconnect a1 and connect it again to run this one'],
  );
  assert.equal(statusTable(rows).filter((l) => l.includes('started by')).length, 0, 'no version to compare with, nothing said');
  const [old, current] = checkDaemons(rows, '1.1.0');
  assert.equal(old!.status, 'warn');
  assert.match(old!.detail, /^a1 \(context prod, pid 42\) was started by kubectl-proxyout 1\.0\.0, this is 1\.1\.0$/);
  assert.equal(old!.fix, 'disconnect a1 and connect it again to run this one');
  assert.equal(current!.status, 'ok');
});

test('doctor gives a count of open streams only when the daemon gave one', () => {
  const [said, unknown] = checkDaemons([
    proxyStatusFixture({ id: 'a1', openStreams: 3 }),
    proxyStatusFixture({ id: 'b2', state: 'starting', openStreams: null, cache: null }),
  ]);
  assert.match(said!.detail, /is running, caches synced, 3 open streams$/);
  assert.match(unknown!.detail, /^b2 .* is starting, caches unknown$/);
});
