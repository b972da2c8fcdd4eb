// The bundle's command map (src/entry/command-map.ts) lists exactly the commands of src/commands/
// — a command missing there would be missing from the single executable — each loading that
// command's class, and selfInvocation starts the right program in each packaging.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { COMMAND_LOADERS } from '../../src/entry/command-map.js';
import { binScriptPath, selfInvocation } from '../../src/core/self.js';
import { repoRoot } from '../helpers/proxy-process.js';

test('every file in src/commands is in the command map, under its file name, loading its class', async () => {
  const files = readdirSync(path.join(repoRoot, 'src', 'commands'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => f.slice(0, -3))
    .sort();
  assert.deepEqual(Object.keys(COMMAND_LOADERS).sort(), files);
  for (const id of files) {
    const mod = (await import(`../../src/commands/${id}.js`)) as { default: unknown };
    assert.equal((await COMMAND_LOADERS[id]!()).default, mod.default, id);
  }
});

test('selfInvocation: the single executable alone; else node and the bin script', () => {
  assert.deepEqual(selfInvocation(true), { command: process.execPath, args: [] });
  assert.deepEqual(selfInvocation(false), { command: process.execPath, args: [path.join(repoRoot, 'bin', 'kubectl-proxyout')] });
  assert.equal(binScriptPath(), path.join(repoRoot, 'bin', 'kubectl-proxyout'));
});
