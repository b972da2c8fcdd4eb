import { test } from 'node:test';
import assert from 'node:assert/strict';
import { complete, formatCompletion, type CommandShape, type CompletionSources } from '../../src/cli/complete.js';

const kubeFlags = {
  kubeconfig: { type: 'option', helpValue: '<file>', summary: 'Kubeconfig file.' },
  context: { type: 'option', multiple: true, summary: 'Context.' },
  namespace: { type: 'option', char: 'n', summary: 'Namespace.' },
  direct: { type: 'boolean', summary: 'Dial the rest.' },
  transport: { type: 'option', options: ['auto', 'spdy', 'websocket'] },
  secret: { type: 'boolean', hidden: true },
} as const;
const commands: CommandShape[] = [
  { id: 'serve', hidden: true, flags: kubeFlags, takesId: false, runsCommand: false },
  { id: 'connect', summary: 'Start a managed\nproxy.', flags: kubeFlags, takesId: false, runsCommand: false },
  { id: 'disconnect', summary: 'Stop one.', flags: { all: { type: 'boolean' } }, takesId: true, runsCommand: false },
  { id: 'exec', summary: 'Run a command.', flags: kubeFlags, takesId: false, runsCommand: true },
  { id: 'logs', summary: 'A log.', flags: {}, takesId: true, runsCommand: false },
];
const seen: Array<string | undefined> = [];
const sources: CompletionSources = {
  contexts: (kc) => (seen.push(kc), kc === '/other' ? [{ name: 'other' }] : [{ name: 'prod', description: 'cluster p' }, { name: 'staging' }]),
  namespaces: () => ['default', 'shop'],
  connectionIds: () => [{ name: '0a1b2c3d', description: 'context prod, namespace shop' }],
  logIds: () => [{ name: '0a1b2c3d' }, { name: 'exec' }, { name: 'old-one', description: 'stopped' }],
};
const values = (...words: string[]) => complete(words, commands, sources).candidates.map((c) => c.value);

test('first word: visible commands and help; a flag-first line is the foreground proxy', () => {
  assert.deepEqual(values(''), ['connect', 'disconnect', 'exec', 'logs', 'help']);
  assert.deepEqual(values('help', 'di'), ['disconnect']);
  assert.deepEqual(values('--di'), ['--direct']);
  assert.deepEqual(values('--context', 'prod', '--con'), ['--context'], 'a repeatable flag stays on offer');
  assert.deepEqual(values('--direct', '--di'), [], 'a given flag is not offered again');
  assert.deepEqual(values('unknown', ''), []);
});

test('flag values: options, contexts of the --kubeconfig on the line, namespaces, -n attached', () => {
  assert.deepEqual(values('connect', '--transport', 's'), ['spdy']);
  assert.deepEqual(values('connect', '--transport=w'), ['--transport=websocket']);
  assert.deepEqual(values('--context', ''), ['prod', 'staging']);
  assert.deepEqual(values('--kubeconfig', '/other', '--context', ''), ['other']);
  assert.deepEqual(values('--kubeconfig=/other', '--context=o'), ['--context=other']);
  assert.deepEqual(values('-n', 's'), ['shop']);
  assert.deepEqual(values('-nshop', '--dir'), ['--direct'], '-nshop took its value with it');
  assert.deepEqual(values('-', ''), [], 'a lone dash is a positional');
  assert.equal(complete(['--kubeconfig', ''], commands, sources).directive, 0, 'files: the shell completes');
  assert.equal(complete(['--namespace', ''], commands, sources).directive, 4);
  assert.ok(seen.includes('/other'));
});

test("connection IDs for one argument; after exec's command, the shell completes", () => {
  assert.deepEqual(values('disconnect', ''), ['0a1b2c3d']);
  assert.deepEqual(values('disconnect', '--all', '0'), ['0a1b2c3d']);
  assert.deepEqual(values('disconnect', '0a1b2c3d', ''), []);
  // logs takes what has a log: stopped proxies, and exec's.
  assert.deepEqual(values('logs', ''), ['0a1b2c3d', 'exec', 'old-one']);
  assert.deepEqual(values('connect', ''), []);
  for (const words of [
    ['exec', '--', 'cu'],
    ['exec', 'curl', '-'],
    ['exec', '-n', 'shop', '--', ''],
  ]) {
    assert.deepEqual(complete(words, commands, sources), { candidates: [], directive: 0 }, words.join(' '));
  }
});

test("the answer is cobra's: value, tab, one-line description; then the directive", () => {
  const out = formatCompletion(complete(['con'], commands, sources));
  assert.equal(out, 'connect\tStart a managed proxy.\n:4\n');
  assert.equal(formatCompletion(complete(['disconnect', ''], commands, sources)), '0a1b2c3d\tcontext prod, namespace shop\n:4\n');
});

test('a name with control characters is left out; a description with them is escaped', () => {
  const hostile: CompletionSources = {
    ...sources,
    contexts: () => [
      { name: 'ok', description: 'cluster c\x1b]0;PWNED\x07\x9b2J' },
      { name: 'ctx\x1b[31mred', description: 'cluster d' },
      { name: 'a\nforged', description: 'cluster e' },
    ],
  };
  const out = formatCompletion(complete(['connect', '--context', ''], commands, hostile));
  assert.equal(out, 'ok\tcluster c\\x1b]0;PWNED\\x07\\x9b2J\n:4\n');
});
