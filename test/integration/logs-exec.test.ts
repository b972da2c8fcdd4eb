// `logs exec` through the real CLI: every `exec` writes its temporary proxy's lines to one file,
// so its readable lines keep the pid that tells two runs apart; a daemon's log omits it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { binPath, runCli } from '../helpers/proxy-process.js';

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

test('logs exec -f follows until Ctrl-C: exec runs come and go, none ends it', async (t) => {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-logs-exec-f-'));
  t.after(() => rmSync(stateDir, { recursive: true, force: true }));
  mkdirSync(path.join(stateDir, 'logs'), { mode: 0o700 });
  const file = path.join(stateDir, 'logs', 'exec.log');
  writeFileSync(file, `${line(101, 'first')}\n`, { mode: 0o600 });
  const proc = spawn(process.execPath, [binPath, 'logs', 'exec', '-f'], {
    env: { ...process.env, KUBECTL_PROXYOUT_STATE_DIR: stateDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => proc.kill('SIGKILL'));
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  let exited = false;
  proc.once('exit', () => (exited = true));
  // Past the 1 s check that ends a daemon's follow once its proxy is gone (exec has none).
  await new Promise((r) => setTimeout(r, 2_500));
  assert.equal(exited, false, `it stopped following: ${out}`);
  appendFileSync(file, `${line(202, 'second')}\n`);
  const deadline = Date.now() + 5_000;
  while (!out.includes('second') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  assert.match(out, /first pid=101[^]*second pid=202/);
  proc.kill('SIGINT');
  const [code] = (await once(proc, 'exit')) as [number | null];
  assert.equal(code, 0);
});

test('logs -f ends once its reader has gone (logs -f ID | grep -m1 …)', async (t) => {
  const stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-logs-epipe-'));
  t.after(() => rmSync(stateDir, { recursive: true, force: true }));
  mkdirSync(path.join(stateDir, 'logs'), { mode: 0o700 });
  const file = path.join(stateDir, 'logs', 'exec.log');
  writeFileSync(file, `${line(101, 'first')}\n`, { mode: 0o600 });
  const proc = spawn(process.execPath, [binPath, 'logs', 'exec', '-f'], {
    env: { ...process.env, KUBECTL_PROXYOUT_STATE_DIR: stateDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => proc.kill('SIGKILL'));
  let stderr = '';
  proc.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exit = once(proc, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  await once(proc.stdout, 'data');
  // The reader goes, as head or grep -m1 does once it has its line; the next line meets EPIPE.
  proc.stdout.destroy();
  appendFileSync(file, `${line(202, 'second')}\n`);
  const ended = await Promise.race([exit, new Promise((r) => setTimeout(r, 5_000, 'still following'))]);
  assert.notEqual(ended, 'still following', 'logs -f kept following a closed pipe');
  assert.deepEqual(ended, [0, null]);
  assert.equal(stderr, '');
});
