// Fails when oclif.manifest.json no longer matches the built commands. oclif trusts that file
// for help and command lookup, so a stale one hides new commands and flags from users.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildManifest, serializeManifest } from '../../src/cli/manifest.js';

// Tests run from dist/test/unit, so the package root is three levels up.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const HINT = 'oclif.manifest.json is stale: run `npm run manifest` and commit the result';

test('committed oclif.manifest.json matches the built commands', async () => {
  const committed = readFileSync(`${ROOT}oclif.manifest.json`, 'utf8');
  const fresh = serializeManifest(await buildManifest(ROOT));
  // Compare parsed first for a readable diff, then bytes so formatting drift is caught too.
  assert.deepEqual(JSON.parse(committed), JSON.parse(fresh), HINT);
  assert.equal(committed, fresh, HINT);
});

test('the manifest knows the foreground command, hidden', () => {
  const manifest = JSON.parse(readFileSync(`${ROOT}oclif.manifest.json`, 'utf8')) as {
    commands: Record<string, { hidden?: boolean; flags: Record<string, unknown> }>;
  };
  const serve = manifest.commands['serve'];
  assert.ok(serve, 'serve command missing');
  assert.equal(serve.hidden, true);
  for (const flag of ['listen-socks', 'listen-http', 'kubeconfig', 'context', 'namespace', 'log-level', 'connect-timeout']) {
    assert.ok(flag in serve.flags, `--${flag} missing`);
  }
});

test('flag help names config keys as the file spells them now: extra-ca, not the old extraCA', () => {
  const manifest = JSON.parse(readFileSync(`${ROOT}oclif.manifest.json`, 'utf8')) as {
    commands: Record<string, { flags: Record<string, { summary?: string; description?: string }> }>;
  };
  const withExtraCA = Object.entries(manifest.commands).filter(([, c]) => 'extra-ca' in c.flags);
  assert.ok(withExtraCA.length > 0);
  for (const [name, c] of withExtraCA) {
    const help = `${c.flags['extra-ca']!.summary ?? ''} ${c.flags['extra-ca']!.description ?? ''}`;
    assert.doesNotMatch(help, /extraCA/, `${name} --extra-ca: ${help}`);
  }
});
