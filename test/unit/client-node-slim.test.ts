// The bundle gives client-node's KubeConfig (dist/config.js) a slim stand-in for its generated
// API package (scripts/client-node-gen-slim.mjs). That holds only while config.js asks that
// package for nothing else: checked here against the installed client-node, so an upgrade that
// needs more fails this test instead of the single executable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { repoRoot } from '../helpers/proxy-process.js';

const require = createRequire(path.join(repoRoot, 'package.json'));
const clientNodeDist = path.dirname(require.resolve('@kubernetes/client-node'));

test('config.js takes exactly createConfiguration and ServerConfiguration from ./gen/index.js, and the slim module has both', async () => {
  const source = readFileSync(path.join(clientNodeDist, 'config.js'), 'utf8');
  const imports = [...source.matchAll(/import\s*\{([^}]*)\}\s*from\s*['"]\.\/gen\/index\.js['"]/g)].flatMap((m) => m[1]!.split(',').map((s) => s.trim()).filter(Boolean));
  assert.deepEqual(imports.sort(), ['ServerConfiguration', 'createConfiguration']);
  assert.doesNotMatch(source, /from\s*['"]\.\/gen\/(?!index\.js)/, 'no other generated module');
  const slim = (await import(pathToFileURL(path.join(repoRoot, 'scripts', 'client-node-gen-slim.mjs')).href)) as Record<string, unknown>;
  assert.equal(typeof slim.createConfiguration, 'function');
  assert.equal(typeof slim.ServerConfiguration, 'function');
});
