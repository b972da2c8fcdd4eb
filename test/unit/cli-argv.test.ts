import { test } from 'node:test';
import assert from 'node:assert/strict';
import { routeArgv } from '../../src/cli/argv.js';

test('a bare invocation runs the foreground proxy', () => {
  assert.deepEqual(routeArgv([]), ['serve']);
});

test('a flag-first invocation goes to serve with every argument kept in order', () => {
  assert.deepEqual(routeArgv(['--listen-socks', '127.0.0.1:0']), ['serve', '--listen-socks', '127.0.0.1:0']);
  assert.deepEqual(routeArgv(['-n', 'shop']), ['serve', '-n', 'shop']);
  assert.deepEqual(routeArgv(['--context=prod', '--listen-http', ':3128']), ['serve', '--context=prod', '--listen-http', ':3128']);
  assert.deepEqual(routeArgv(['-n', 'shop', '--help']), ['serve', '-n', 'shop', '--help'], 'help for serve, since a serve flag came first');
});

test('root help and version are left for oclif', () => {
  for (const flag of ['--help', '-h', '--version']) {
    assert.deepEqual(routeArgv([flag]), [flag]);
  }
  assert.deepEqual(routeArgv(['--help', 'status']), ['--help', 'status']);
});

test('`help [COMMAND]` becomes `[COMMAND] --help`', () => {
  assert.deepEqual(routeArgv(['help']), ['--help']);
  assert.deepEqual(routeArgv(['help', 'status']), ['status', '--help']);
});

test('a first word is never routed: known commands run, unknown ones get oclif’s error', () => {
  for (const argv of [['serve', '-n', 'x'], ['status'], ['connect', '--context', 'a'], ['frobnicate', '-n', 'x']]) {
    assert.deepEqual(routeArgv(argv), argv);
  }
});

test('the input array is not modified', () => {
  const argv = Object.freeze(['-n', 'shop']);
  routeArgv(argv);
  assert.deepEqual(argv, ['-n', 'shop']);
});
