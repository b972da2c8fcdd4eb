// `exec` on a real pseudo-terminal (util-linux script(1)): Ctrl-C and Ctrl-\ go to the whole
// foreground group, so CMD gets them from the terminal and must not get them again from exec; a
// signal sent to exec's pid alone still reaches CMD, and CMD's exit status stays exec's.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { binPath } from '../helpers/proxy-process.js';
import { isAlive } from '../../src/state/process.js';

const hasScript = spawnSync('script', ['--version']).status === 0;
const skip = hasScript ? false : 'util-linux `script` is not installed';
let cluster: TestCluster;
let stateDir: string;

before(async () => {
  cluster = await startTestCluster();
  stateDir = mkdtempSync(path.join(tmpdir(), 'pxt-'));
});
after(async () => {
  await cluster?.close();
  rmSync(stateDir, { recursive: true, force: true });
});

const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** Counts the SIGINTs and SIGQUITs it gets; on SIGTERM prints the counts and exits 3. */
const COUNTER = `
  const seen = { SIGINT: 0, SIGQUIT: 0 };
  for (const s of Object.keys(seen)) process.on(s, () => console.log(s + ' ' + ++seen[s]));
  process.on('SIGTERM', () => { console.log('counted SIGINT=' + seen.SIGINT + ' SIGQUIT=' + seen.SIGQUIT); process.exit(3); });
  console.log('ready exec=' + process.ppid + ' cmd=' + process.pid);
  setInterval(() => {}, 1000);`;

/** `kubectl proxyout exec -- CMD` as the foreground job of a fresh terminal; `out` is what the terminal shows. */
function onTerminal(command: string[]): { term: ChildProcess; out: () => string } {
  const line = ['exec', process.execPath, binPath, 'exec', '--kubeconfig', cluster.kubeconfig, '--', ...command]
    .map((w, i) => (i === 0 ? w : shellQuote(w)))
    .join(' ');
  const term = spawn('script', ['-qfec', line, '/dev/null'], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, KUBECTL_PROXYOUT_STATE_DIR: stateDir },
  });
  let out = '';
  term.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  return { term, out: () => out };
}

/** Types `key` on the terminal CMD runs on, then sends SIGTERM to exec's pid; resolves with the counts CMD printed and the exit status. */
async function typeThenTerminate(key: string, echo: RegExp): Promise<{ counted: string; code: number | null }> {
  const { term, out } = onTerminal([process.execPath, '-e', COUNTER]);
  let cmdPid = 0;
  try {
    const ready = await eventually(async () => /ready exec=(\d+) cmd=(\d+)/.exec(out()) ?? undefined, 30_000, 50);
    const execPid = Number(ready[1]);
    cmdPid = Number(ready[2]);
    term.stdin!.write(key);
    await eventually(async () => echo.test(out()), 10_000, 20);
    // To exec's pid alone (kill PID, a service manager): passed on, after whatever exec passed on
    // for the key (signals are handled in order), so the counts CMD prints are final.
    process.kill(execPid, 'SIGTERM');
    const [code] = (await once(term, 'exit')) as [number | null];
    return { counted: /counted .*/.exec(out())?.[0] ?? out(), code };
  } finally {
    if (cmdPid > 0 && isAlive(cmdPid)) process.kill(cmdPid, 'SIGKILL');
    term.kill('SIGKILL');
  }
}

test('Ctrl-C reaches CMD once (not again from exec); kill of exec’s pid still reaches CMD; its status is exec’s', { skip }, async () => {
  const { counted, code } = await typeThenTerminate('\u0003', /SIGINT 1/);
  assert.equal(counted.trim(), 'counted SIGINT=1 SIGQUIT=0');
  assert.equal(code, 3, "CMD's exit status is exec's (script -e passes it on)");
});

test('Ctrl-\\ reaches CMD once, and exec lives on until CMD ends', { skip }, async () => {
  const { counted, code } = await typeThenTerminate('\u001c', /SIGQUIT 1/);
  assert.equal(counted.trim(), 'counted SIGINT=0 SIGQUIT=1');
  assert.equal(code, 3);
});

test('CMD killed by the terminal’s Ctrl-C: exec exits 130 and its temporary proxy is gone', { skip }, async () => {
  const { term, out } = onTerminal(['sh', '-c', 'echo ready; exec sleep 60']);
  try {
    await eventually(async () => out().includes('ready'), 30_000, 50);
    const port = Number(/started a temporary one .*socks 127\.0\.0\.1:(\d+)/.exec(out())?.[1]);
    assert.ok(port > 0, out());
    term.stdin!.write('\u0003');
    const [code] = (await once(term, 'exit')) as [number | null];
    assert.equal(code, 130, out());
    const s = net.connect(port, '127.0.0.1');
    const [err] = (await once(s, 'error')) as [NodeJS.ErrnoException];
    assert.equal(err.code, 'ECONNREFUSED', 'the temporary proxy stopped with CMD');
  } finally {
    term.kill('SIGKILL');
  }
});

test('Ctrl-C that kills CMD stops the shell loop that runs exec, as it would stop one running CMD', { skip }, async () => {
  const exec = [process.execPath, binPath, 'exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', 'echo ready; exec sleep 60'].map(shellQuote).join(' ');
  // bash goes on with a loop when its job exits 130 by itself (it takes that for a CMD that
  // handled Ctrl-C); it stops when the job died of SIGINT.
  const loop = `for i in 1 2; do ${exec}; echo "next $i status $?"; done; echo loop-done`;
  const term = spawn('script', ['-qfec', `bash -c ${shellQuote(loop)}`, '/dev/null'], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, KUBECTL_PROXYOUT_STATE_DIR: stateDir },
  });
  let out = '';
  term.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  try {
    await eventually(async () => out.includes('ready'), 30_000, 50);
    term.stdin!.write('\u0003');
    await once(term, 'exit');
    assert.doesNotMatch(out, /next 1|loop-done/, out);
  } finally {
    term.kill('SIGKILL');
  }
});

test('CMD that exits by itself on its terminal’s hangup (as ssh does): exec dies of the hangup, no abort', { skip }, async (t) => {
  const errDir = mkdtempSync(path.join(tmpdir(), 'pxt-hup-'));
  t.after(() => rmSync(errDir, { recursive: true, force: true }));
  const errFile = path.join(errDir, 'stderr');
  // sh, not node: a node CMD would itself abort at such an exit (Node 20 on a gone terminal).
  const cmd = 'sleep 60 & trap "kill $!; exit 3" HUP; echo "ready exec=$PPID cmd=$$"; wait';
  const line = `exec ${[process.execPath, binPath, 'exec', '--kubeconfig', cluster.kubeconfig, '--', 'sh', '-c', cmd].map(shellQuote).join(' ')} 2>${shellQuote(errFile)}`;
  const term = spawn('script', ['-qfec', line, '/dev/null'], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, KUBECTL_PROXYOUT_STATE_DIR: stateDir },
  });
  t.after(() => term.kill('SIGKILL'));
  let out = '';
  term.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
  const ready = await eventually(async () => /ready exec=(\d+) cmd=(\d+)/.exec(out) ?? undefined, 30_000, 50);
  const [execPid, cmdPid] = [Number(ready[1]), Number(ready[2])];
  // Closing the terminal: exec, its session leader, gets the hangup and passes it on to CMD.
  term.kill('SIGKILL');
  await eventually(async () => !isAlive(execPid) && !isAlive(cmdPid), 15_000, 50);
  assert.doesNotMatch(readFileSync(errFile, 'utf8'), /EIO|Assertion failed|Native stack trace/);
});
