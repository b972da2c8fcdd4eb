// doctor's state-directory check (doctor/local.ts checkStateDir): a directory above the state
// directory that another user could replace it through is a warning naming it, as OpenSSH's
// StrictModes would refuse it; /tmp's sticky bit makes a world-writable parent safe.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { checkStateDir } from '../../src/doctor/local.js';
import { layout } from '../../src/state/paths.js';

const uid = process.getuid!();

function stateUnder(t: { after: (fn: () => void) => void }) {
  const top = mkdtempSync(path.join(os.tmpdir(), 'proxyout-parents-'));
  t.after(() => rmSync(top, { recursive: true, force: true }));
  const shared = path.join(top, 'shared');
  const root = path.join(shared, 'me', 'state');
  mkdirSync(root, { recursive: true, mode: 0o700 });
  chmodSync(path.join(shared, 'me'), 0o700);
  return { shared, root };
}

test('a parent others can write (no sticky bit) is a warning naming it; sticky, it is fine', { skip: process.platform === 'win32' }, (t) => {
  const { shared, root } = stateUnder(t);
  chmodSync(shared, 0o777);
  const [warned] = checkStateDir(layout(root), uid);
  assert.equal(warned!.status, 'warn');
  assert.match(
    warned!.detail,
    new RegExp(`another user could replace it through a directory above it: ${shared}.* is writable by group or others \\(mode 777\\) and not sticky`),
  );
  assert.ok(warned!.fix!.includes(`chmod go-w ${shared}`), warned!.fix);
  chmodSync(shared, 0o1777);
  assert.equal(checkStateDir(layout(root), uid)[0]!.status, 'ok');
  chmodSync(shared, 0o755);
  assert.equal(checkStateDir(layout(root), uid)[0]!.status, 'ok');
});

test('a parent another user owns is a warning; root is trusted', { skip: uid !== 0 && 'needs root to chown' }, (t) => {
  const { shared, root } = stateUnder(t);
  chmodSync(shared, 0o755);
  chownSync(shared, 65534, 65534);
  const [warned] = checkStateDir(layout(root), uid);
  assert.equal(warned!.status, 'warn');
  assert.match(warned!.detail, new RegExp(`${shared} is owned by uid 65534`));
  chownSync(shared, 0, 0);
  assert.equal(checkStateDir(layout(root), uid)[0]!.status, 'ok');
});
