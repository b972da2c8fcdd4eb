// `reload` looks at the managed proxies under the state lock, as every other command does: while a
// `connect` holds the lock between writing its entry and recording the daemon's pid, an entry
// without a pid would look dead, and inspecting it then removes its files under the connect.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureStateDir, layout, StateDirError } from '../../src/state/paths.js';
import { withStateLock } from '../../src/state/lock.js';
import { readEntry, writeEntry } from '../../src/managed/store.js';
import { reloadProxy } from '../../src/managed/reload.js';
import { proxyEntry } from '../helpers/proxy-entry.js';

function stateIn(t: { after(fn: () => void): void }) {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-reload-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return ensureStateDir(layout(dir));
}

test('reload waits for the state lock: an entry a connect is still writing is left alone', async (t) => {
  const l = stateIn(t);
  let settled = false;
  let reloading: Promise<unknown> | undefined;
  await withStateLock(l, async () => {
    // What connect has done so far: the entry and a route kubeconfig, no pid yet.
    writeEntry(l, proxyEntry('abc'));
    const kubeconfig = path.join(l.proxyDir('abc'), 'kubeconfig');
    writeFileSync(kubeconfig, 'apiVersion: v1\n', { mode: 0o600 });
    reloading = reloadProxy(l, 'abc').finally(() => (settled = true));
    reloading.catch(() => {});
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(settled, false, 'reload waited');
    assert.equal(readEntry(l, 'abc')?.phase, 'starting', 'the entry is not marked dead');
    assert.ok(existsSync(kubeconfig), 'its files are still there');
  });
  // Released without a daemon ever starting: now reload may call it what it is.
  await assert.rejects(reloading!, /abc is dead, not running/);
});

test('reload refuses a state directory others may write, as the other commands do', (t) => {
  const l = stateIn(t);
  chmodSync(l.root, 0o777);
  return assert.rejects(reloadProxy(l, 'abc'), StateDirError);
});
