// What `connect` says of a daemon that stopped while it started (managed/logs.ts): its own last
// error line since it was started, else where to look.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { stoppedWhileStarting } from '../../src/managed/logs.js';

test("the daemon's last error since it started, of its own pid; else where to look", () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-stopped-'));
  try {
    const file = path.join(dir, 'p.log');
    const line = (o: Record<string, unknown>) => JSON.stringify(o);
    writeFileSync(
      file,
      [
        line({ level: 50, time: 1000, pid: 7, msg: 'old failure' }),
        line({ level: 50, time: 2000, pid: 7, msg: 'could not record the daemon as running; stopping', error: 'ENOSPC: no space left on device' }),
        line({ level: 30, time: 2001, pid: 7, msg: 'daemon stopping' }),
        'not json',
        line({ level: 50, time: 3000, pid: 8, msg: "another daemon's error" }),
        '',
      ].join('\n'),
    );
    assert.equal(
      stoppedWhileStarting(file, 'p', 1500, 7),
      'proxy p stopped while it started: could not record the daemon as running; stopping (ENOSPC: no space left on device)',
    );
    assert.equal(stoppedWhileStarting(file, 'p', 1500, undefined), "proxy p stopped while it started: another daemon's error");
    const fallback = 'proxy p was stopped while it started; see `kubectl proxyout logs p`';
    assert.equal(stoppedWhileStarting(file, 'p', 5000, 7), fallback, 'nothing since it started (a disconnect)');
    assert.equal(stoppedWhileStarting(path.join(dir, 'none.log'), 'p', 0, 7), fallback, 'no log');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
