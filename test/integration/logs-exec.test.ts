// `logs exec` through the real CLI: every `exec` writes its temporary proxy's lines to one file,
// so its readable lines keep the pid that tells two runs apart; a daemon's log omits it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCli } from '../helpers/proxy-process.js';

const line = (pid: number, msg: string) => JSON.stringify({ level: 30, time: Date.UTC(2026, 0, 1), pid, msg, route: 'r' });

test('logs exec shows each line’s pid; a daemon’s log does not', async (t) => {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-logs-exec-'));
  t.after(() => rmSync(stateDir, { recursive: true, force: true }));
  mkdirSync(path.join(stateDir, 'logs'), { mode: 0o700 });
  const text = `${line(101, 'proxy ready')}\n${line(202, 'proxy ready')}\n`;
  writeFileSync(path.join(stateDir, 'logs', 'exec.log'), text, { mode: 0o600 });
  writeFileSync(path.join(stateDir, 'logs', 'a1b2c3d4.log'), text, { mode: 0o600 });
  const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir };

  const exec = await runCli(['logs', 'exec'], { env });
  assert.equal(exec.code, 0, exec.stderr);
  const lines = exec.stdout.trim().split('\n');
  assert.equal(lines.length, 2, exec.stdout);
  assert.match(lines[0]!, / INFO {2}proxy ready pid=101 route=r$/);
  assert.match(lines[1]!, / INFO {2}proxy ready pid=202 route=r$/);

  const daemon = await runCli(['logs', 'a1b2c3d4'], { env });
  assert.equal(daemon.code, 0, daemon.stderr);
  assert.doesNotMatch(daemon.stdout, /pid=/);
});
