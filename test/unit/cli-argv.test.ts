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

test('exec: CMD starts at the first word that is no flag of exec nor its value; a `--` marks it', () => {
  const flags = {
    namespace: { type: 'option', char: 'n' },
    context: { type: 'option' },
    'log-level': { type: 'option' },
    direct: { type: 'boolean' },
    'old-name': { type: 'option', aliases: ['old'] },
  } as const;
  const route = (...argv: string[]) => routeArgv(['exec', ...argv], flags);
  assert.deepEqual(route('kubectl', 'get', 'pods', '-n', 'shop'), ['exec', '--', 'kubectl', 'get', 'pods', '-n', 'shop']);
  assert.deepEqual(route('-n', 'shop', '--context', 'a', '--direct', 'curl', '-sS', 'x'), [
    'exec',
    '-n',
    'shop',
    '--context',
    'a',
    '--direct',
    '--',
    'curl',
    '-sS',
    'x',
  ]);
  assert.deepEqual(route('-nshop', '--context=a', '--no-direct', '--old', 'v', 'env'), [
    'exec',
    '-nshop',
    '--context=a',
    '--no-direct',
    '--old',
    'v',
    '--',
    'env',
  ]);
  assert.deepEqual(route('curl', '--help'), ['exec', '--', 'curl', '--help']);
  assert.deepEqual(route('-', 'x'), ['exec', '--', '-', 'x']);
  // Already separated, or no CMD: as given (oclif reports a bad flag, exec a missing CMD).
  for (const argv of [['-n', 'shop', '--', 'ls', '--', '-l'], ['--context', 'a'], ['--help'], ['--bogus', 'x']]) {
    assert.deepEqual(route(...argv), ['exec', ...(argv[0] === '--bogus' ? ['--bogus', '--', 'x'] : argv)]);
  }
  // Without exec's flags (or for another command) nothing is inserted.
  assert.deepEqual(routeArgv(['exec', 'ls', '-n', 'x']), ['exec', 'ls', '-n', 'x']);
  assert.deepEqual(routeArgv(['status', 'x'], flags), ['status', 'x']);
});
