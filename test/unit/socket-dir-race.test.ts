// The private socket directory (kubectl-proxyout-UID in a shared /tmp: a daemon's control socket
// too long for its proxy directory, `unix:` listeners) and the state directory
// ($KUBECTL_PROXYOUT_STATE_DIR, on CI runners often under /tmp) are created when missing. Another
// user who puts a symlink at the name between our look and our mkdir must not get us to chmod 0700
// what it points to (a daemon run as root would close off /etc or a shared project directory).
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import fs, { chmodSync, lchownSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { checkParent } from '../../src/listeners/unix-socket.js';
import { ensureStateDir, layout } from '../../src/state/paths.js';

const NOBODY = 65534;

const asRoot = { skip: (process.getuid?.() !== 0 || process.platform === 'win32') && 'needs root to plant a symlink as another user' };

/** A shared /tmp, a directory of the user's with mode 0755, and `name` in the shared one still missing. */
function stage(t: TestContext, name: string): { dir: string; victim: string; planted: () => boolean } {
  const base = mkdtempSync(path.join(tmpdir(), 'proxyout-socket-race-'));
  t.after(() => rmSync(base, { recursive: true, force: true }));
  chmodSync(base, 0o1777);
  const victim = path.join(base, 'shared-project');
  mkdirSync(victim);
  chmodSync(victim, 0o755);
  const dir = path.join(base, name);
  // The other user wins the race: their symlink appears right after our lstat said ENOENT.
  const lstatSync = fs.lstatSync;
  let planted = false;
  t.mock.method(fs, 'lstatSync', (...args: Parameters<typeof fs.lstatSync>) => {
    try {
      return lstatSync(...args);
    } catch (err) {
      if (args[0] === dir && !planted) {
        planted = true;
        symlinkSync(victim, dir);
        lchownSync(dir, NOBODY, NOBODY);
      }
      throw err;
    }
  });
  syncBuiltinESMExports();
  t.after(() => {
    t.mock.restoreAll();
    syncBuiltinESMExports();
  });
  return { dir, victim, planted: () => planted };
}

const modeOf = (p: string) => (statSync(p).mode & 0o777).toString(8);

test('a symlink planted at the socket directory just after we looked is refused, and its target keeps its mode', asRoot, (t) => {
  const { dir, victim, planted } = stage(t, `kubectl-proxyout-${process.getuid!()}`);
  assert.throws(() => checkParent(path.join(dir, 'control-0123456789abcdef.sock'), 'the control socket'), /65534/);
  assert.ok(planted(), 'the race was staged');
  assert.equal(modeOf(victim), '755', 'what their symlink points to was not chmodded');
});

test('a symlink planted at the state directory just after we looked is refused, and its target keeps its mode', asRoot, (t) => {
  const { dir, victim, planted } = stage(t, 'proxyout-state');
  assert.throws(() => ensureStateDir(layout(dir)), /65534/);
  assert.ok(planted(), 'the race was staged');
  assert.equal(modeOf(victim), '755', 'what their symlink points to was not chmodded');
});
