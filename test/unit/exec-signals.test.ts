// exec's choice of the signals it passes on to CMD (cli/exec-signals.ts), for every place the two
// processes can stand in, and reading that place: /proc on Linux, ps elsewhere (checked against
// the real ps for this very process).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { passesOn, relayedSignals, type SignalScene } from '../../src/cli/exec-signals.js';
import { processGroupInfo, systemHost, type ProcessHost } from '../../src/state/process.js';

const FG = 500; // the terminal's foreground group
const inFg = { pgrp: FG, terminalGroup: FG, sessionLeader: false };
const scene = (over: Partial<SignalScene>): SignalScene => ({ platform: 'linux', self: inFg, child: inFg, terminalHungUp: false, ...over });

test('SIGINT and SIGQUIT: not passed on when the terminal sent them to the group CMD shares with us', () => {
  for (const signal of ['SIGINT', 'SIGQUIT'] as const) {
    assert.equal(passesOn(signal, scene({})), false, `${signal}: Ctrl-C/Ctrl-\\ reached CMD already`);
    assert.equal(passesOn(signal, scene({ platform: 'darwin' })), false);
    // Not the foreground job (started with &, or no terminal at all): only our pid got it.
    assert.equal(passesOn(signal, scene({ self: { ...inFg, terminalGroup: 777 }, child: { ...inFg, terminalGroup: 777 } })), true, `${signal}: background job`);
    assert.equal(
      passesOn(signal, scene({ self: { ...inFg, terminalGroup: -1 }, child: { ...inFg, terminalGroup: -1 } })),
      true,
      `${signal}: no terminal (a service)`,
    );
    // CMD moved to a group of its own: the terminal's signal did not reach it.
    assert.equal(passesOn(signal, scene({ child: { pgrp: 901, terminalGroup: FG, sessionLeader: false } })), true, `${signal}: CMD in its own group`);
    // Cannot tell: as exec always did.
    assert.equal(passesOn(signal, scene({ self: undefined })), true);
    assert.equal(passesOn(signal, scene({ child: undefined })), true);
  }
});

test('SIGTERM is always passed on; SIGHUP unless a hangup reached our whole group', () => {
  assert.equal(passesOn('SIGTERM', scene({})), true, 'no terminal sends SIGTERM: kill PID, a service manager');
  assert.equal(passesOn('SIGHUP', scene({})), true, 'the terminal is still there: someone sent it to us');
  assert.equal(passesOn('SIGHUP', scene({ terminalHungUp: true })), false, 'the shell (or the kernel) sent the hangup to the job: CMD has it');
  assert.equal(
    passesOn('SIGHUP', scene({ terminalHungUp: true, self: { ...inFg, sessionLeader: true } })),
    true,
    'the kernel sends its hangup to the session leader alone',
  );
  assert.equal(
    passesOn('SIGHUP', scene({ terminalHungUp: true, child: { pgrp: 901, terminalGroup: FG, sessionLeader: false } })),
    true,
    'CMD in its own group',
  );
});

test('Windows: nothing is passed on (the console signals every process on it; a "signal" to a child terminates it); no SIGQUIT', () => {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const)
    assert.equal(passesOn(signal, scene({ platform: 'win32', self: undefined, child: undefined })), false, signal);
  assert.deepEqual(relayedSignals('win32'), ['SIGINT', 'SIGTERM', 'SIGHUP']);
  assert.deepEqual(relayedSignals('linux'), ['SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGHUP']);
});

function fakeHost(platform: NodeJS.Platform, answers: { files?: Record<string, string>; ps?: string }): ProcessHost {
  return {
    platform,
    run: (file, args) => {
      assert.deepEqual([file, args], ['ps', ['-o', 'pgid=,tpgid=,stat=', '-p', '4242']]);
      if (answers.ps === undefined) throw new Error('ps: no such process');
      return answers.ps;
    },
    readFile: (file) => {
      const text = answers.files?.[file];
      if (text === undefined) throw new Error(`ENOENT ${file}`);
      return text;
    },
  };
}

test('reading a process group: /proc/PID/stat on Linux (a comm with spaces and parentheses), ps elsewhere, nothing on Windows', () => {
  // Fields: pid (comm) state ppid pgrp session tty_nr tpgid …
  const stat = (session: number, tpgid: number) =>
    `4242 (my (cmd) x) S 4000 4242 ${session} 34816 ${tpgid} 4194560 ${Array.from({ length: 13 }, (_, i) => i).join(' ')} 987654 0 0`;
  assert.deepEqual(processGroupInfo(4242, fakeHost('linux', { files: { '/proc/4242/stat': stat(4000, 4242) } })), {
    pgrp: 4242,
    terminalGroup: 4242,
    sessionLeader: false,
  });
  assert.deepEqual(processGroupInfo(4242, fakeHost('linux', { files: { '/proc/4242/stat': stat(4242, -1) } })), {
    pgrp: 4242,
    terminalGroup: -1,
    sessionLeader: true,
  });
  assert.equal(processGroupInfo(4242, fakeHost('linux', {})), undefined, 'gone');
  assert.deepEqual(processGroupInfo(4242, fakeHost('darwin', { ps: ' 4242  4242 S+\n' })), { pgrp: 4242, terminalGroup: 4242, sessionLeader: false });
  assert.deepEqual(processGroupInfo(4242, fakeHost('darwin', { ps: ' 4242     0 Ss\n' })), { pgrp: 4242, terminalGroup: 0, sessionLeader: true });
  assert.equal(processGroupInfo(4242, fakeHost('darwin', { ps: '' })), undefined, 'no such process: ps prints nothing');
  assert.equal(processGroupInfo(4242, fakeHost('darwin', {})), undefined);
  assert.equal(processGroupInfo(4242, fakeHost('win32', {})), undefined);
});

test('this process read through /proc and through the real ps agree', { skip: process.platform !== 'linux' && 'Linux only' }, () => {
  const viaProc = processGroupInfo(process.pid);
  const viaPs = processGroupInfo(process.pid, { ...systemHost, platform: 'darwin' });
  assert.ok(viaProc && viaProc.pgrp > 0);
  assert.deepEqual(viaPs, viaProc);
  assert.equal(viaProc.pgrp, Number(execFileSync('ps', ['-o', 'pgid=', '-p', String(process.pid)], { encoding: 'utf8' }).trim()));
});
