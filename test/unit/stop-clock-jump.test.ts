// managed/stop.ts: `disconnect` waits for a daemon's exit on the monotonic clock. The date set back
// meanwhile (NTP stepping a clock that ran ahead, a user fixing the time) kept a disconnect of a
// hung daemon waiting for as long as the clock went back; set forward, it killed at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureStateDir, layout } from '../../src/state/paths.js';
import { readEntry, writeEntry } from '../../src/managed/store.js';
import { isAlive, processIdentity } from '../../src/state/process.js';
import { stopProxy } from '../../src/managed/stop.js';
import { proxyEntry } from '../helpers/proxy-entry.js';

// A daemon that does not stop on SIGTERM (hung in its drain), and says when it got one.
const HUNG_DAEMON = `
process.on('SIGTERM', () => process.stdout.write('term\\n'));
setInterval(() => undefined, 1_000);
process.stdout.write('up\\n');
`;

test('disconnect of a hung daemon kills it after its drain time, though the date is set back an hour meanwhile', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-clock-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const l = ensureStateDir(layout(path.join(dir, 'state')));
  const script = path.join(dir, 'kubectl-proxyout');
  writeFileSync(script, HUNG_DAEMON);
  const child = spawn(process.execPath, [script, 'daemon', '--id', 'hung'], { stdio: ['ignore', 'pipe', 'ignore'] });
  t.after(() => child.kill('SIGKILL'));
  child.stdout.setEncoding('utf8');
  await once(child.stdout, 'data');
  const options = { ...proxyEntry('hung').options, shutdownGraceMs: 0 };
  writeEntry(l, proxyEntry('hung', { phase: 'running', pid: child.pid, procIdentity: processIdentity(child.pid!), options }));

  // Once the stopper has signalled and waits, the wall clock goes back an hour.
  const realNow = Date.now.bind(Date);
  let offset = 0;
  t.mock.method(Date, 'now', () => realNow() + offset);
  child.stdout.on('data', (d: string) => {
    if (d.includes('term')) setTimeout(() => (offset = -3_600_000), 300);
  });
  const stopped = await stopProxy(l, 'hung');
  assert.equal(stopped.outcome, 'killed');
  assert.equal(isAlive(child.pid!), false);
  assert.equal(readEntry(l, 'hung'), undefined);
});
