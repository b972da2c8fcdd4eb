// A proxy a later version started (its state.json has a version this one does not know) beside
// this version's commands, as with two installs on PATH: they must not take it for an orphan and
// remove its directory (its daemon would go on, holding its ports, with nothing to stop it), but
// say which kubectl-proxyout manages it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureStateDir, layout, type StateLayout } from '../../src/state/paths.js';
import { NewerEntryError, writeEntry } from '../../src/managed/store.js';
import { inspect, inspectAll } from '../../src/managed/registry.js';
import { PartlyStoppedError, stopAll } from '../../src/managed/stop.js';
import { isAlive, processIdentity } from '../../src/state/process.js';
import { proxyEntry } from '../helpers/proxy-entry.js';
import { binPath } from '../helpers/proxy-process.js';

function stateDir(t: { after(fn: () => void): void }): StateLayout {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-newer-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const l = layout(dir);
  ensureStateDir(l);
  return l;
}

/** The entry as a later version might write it: version 2, fields this one does not know. */
function writeNewer(l: StateLayout, id: string): void {
  writeEntry(l, proxyEntry(id, { phase: 'running', pid: process.pid }));
  const file = l.stateFile(id);
  writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, 'utf8')), version: 2, routesV2: [] }));
}

test("a newer version's entry is not removed as an orphan; the commands say who manages it", (t) => {
  const l = stateDir(t);
  writeNewer(l, 'later');
  assert.throws(() => inspectAll(l), NewerEntryError);
  assert.throws(
    () => inspect(l, 'later'),
    /proxy later was started by a newer kubectl-proxyout \(its state\.json is version 2; this one knows version 1\): manage it with that version/,
  );
  assert.ok(existsSync(l.stateFile('later')), 'its state is kept');
});

test("an unreadable state.json is still an orphan's, and removed", (t) => {
  const l = stateDir(t);
  writeEntry(l, proxyEntry('junk'));
  writeFileSync(l.stateFile('junk'), '{"version": 1, "id": "ju');
  assert.deepEqual(inspectAll(l), []);
  assert.equal(existsSync(l.proxyDir('junk')), false);
});

test("quit beside a newer version's proxy stops this version's before it says so", async (t) => {
  const l = stateDir(t);
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-newer-bin-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const script = path.join(dir, 'kubectl-proxyout');
  // Slow to exit on SIGTERM, as a daemon letting its streams finish.
  writeFileSync(script, "process.on('SIGTERM', () => setTimeout(() => process.exit(0), 300)); setInterval(() => {}, 1000); process.stdout.write('up');");
  const child = spawn(process.execPath, [script, 'daemon', '--id', 'mine'], { stdio: ['ignore', 'pipe', 'ignore'] });
  t.after(() => child.kill('SIGKILL'));
  await once(child.stdout, 'data');
  writeEntry(l, proxyEntry('mine', { phase: 'running', pid: child.pid, procIdentity: processIdentity(child.pid!) }));
  writeNewer(l, 'later');

  writeFileSync(path.join(l.proxiesDir, 'junk.tmp'), '');
  await assert.rejects(stopAll(l, { sweep: true }), (err: unknown) => {
    assert.ok(err instanceof PartlyStoppedError);
    assert.ok(err.reason instanceof NewerEntryError);
    assert.deepEqual(
      err.stopped.map((s) => [s.id, s.outcome]),
      [['mine', 'stopped']],
      'what was stopped is told',
    );
    return true;
  });
  assert.equal(isAlive(child.pid!), false, "this version's daemon was stopped before the error");
  assert.equal(existsSync(l.proxyDir('mine')), false);
  assert.ok(existsSync(l.stateFile('later')), "the newer one's state is kept");
  assert.equal(existsSync(path.join(l.proxiesDir, 'junk.tmp')), false, 'the sweep still ran');
});

test("quit beside a newer version's proxy prints what it stopped, then the error, and exits 1", (t) => {
  const l = stateDir(t);
  writeEntry(l, proxyEntry('gone', { phase: 'running', pid: 2 ** 22 + 7 }));
  writeNewer(l, 'later');
  const run = spawnSync(process.execPath, [binPath, 'quit'], { encoding: 'utf8', env: { ...process.env, KUBECTL_PROXYOUT_STATE_DIR: l.root } });
  assert.equal(run.status, 1);
  assert.match(run.stdout, /^kubectl-proxyout: gone \(context sim, namespace shop\) was not running; removed its state$/m);
  assert.match(run.stderr, /proxy later was started by a newer kubectl-proxyout/);
  assert.doesNotMatch(run.stderr, /    at /, 'one line, no stack');
  assert.ok(existsSync(l.stateFile('later')));
});

test("shell completion still offers every ID beside a newer version's entry", (t) => {
  const l = stateDir(t);
  writeEntry(l, proxyEntry('mine'));
  writeNewer(l, 'later');
  const out = execFileSync(process.execPath, [binPath, '__complete', 'disconnect', ''], {
    encoding: 'utf8',
    env: { ...process.env, KUBECTL_PROXYOUT_STATE_DIR: l.root },
  });
  assert.deepEqual(out.trimEnd().split('\n'), ['later\tstarted by a newer kubectl-proxyout', 'mine\tcontext sim, namespace shop', ':4']);
});

test("doctor beside a newer version's entry fails the daemon check once, saying which doctor to run", (t) => {
  const l = stateDir(t);
  writeNewer(l, 'later');
  let out = '';
  try {
    execFileSync(process.execPath, [binPath, 'doctor', '--json', '--listen-socks', '127.0.0.1:0'], {
      encoding: 'utf8',
      env: { ...process.env, KUBECTL_PROXYOUT_STATE_DIR: l.root, KUBECONFIG: path.join(l.root, 'none') },
    });
  } catch (err) {
    out = (err as { stdout: string }).stdout; // exit 1: checks failed
  }
  const daemon = (JSON.parse(out) as { checks: Array<{ name: string; status: string; fix?: string }> }).checks.filter((c) => c.name === 'daemon');
  assert.deepEqual(
    daemon.map((c) => [c.status, c.fix]),
    [['fail', 'run `kubectl proxyout doctor` with the newer kubectl-proxyout (`type -a kubectl-proxyout` lists those on your PATH)']],
  );
});
