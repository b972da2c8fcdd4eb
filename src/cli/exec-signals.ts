// Which signals `exec` passes on to CMD. CMD runs in our process group, and a terminal signals a
// whole group: Ctrl-C (SIGINT) and Ctrl-\ (SIGQUIT) go to its foreground group, and the SIGHUP of
// a terminal that closed reaches a job's whole group (the shell sends it to each job; the kernel
// to the foreground group when the session leader exits). Such a signal has already reached CMD;
// passing it on again made tools that count Ctrl-Cs (npm, docker compose, terraform) take the
// second one for "force quit now".
//
// sudo decides from who sent the signal (src/exec_nopty.c, signal_cb_nopty): SIGINT/SIGQUIT/SIGTSTP
// are relayed only when a user process sent them (SI_USER), not the kernel's keyboard ones, and
// never when a process of the command's own group sent them. system(3) ignores SIGINT and SIGQUIT
// in the parent while the child runs. Node tells a handler no sender, so we decide from where the
// processes stand when the signal comes:
//  - SIGINT, SIGQUIT: not passed on when we and CMD are in the foreground group of our terminal —
//    the only group the terminal sends them to. Otherwise (no terminal, a background job, CMD in a
//    group of its own) they came to our pid alone: passed on. The cost: a `kill -INT PID` from
//    elsewhere while exec is the foreground job is taken for the terminal's (as system(3) ignores it).
//  - SIGHUP: not passed on when our terminal has hung up, we are not the session leader (the
//    kernel's own hangup signal goes to the leader alone) and CMD shares our group.
//  - SIGTERM: always passed on (no terminal sends it: `kill PID`, a service manager).
//  - Windows: none. The console's Ctrl-C, Ctrl-Break and close events reach every process attached
//    to it, CMD too, and a signal "sent" to a child there terminates it at once. We still listen,
//    so that exec (and its temporary proxy) lives until CMD has finished.
// When a process's place cannot be read, the signal is passed on, as exec always did.
import type { ChildProcess } from 'node:child_process';
import { hasControllingTerminal } from '../core/terminal.js';
import { processGroupInfo, systemHost, type ProcessGroupInfo, type ProcessHost } from '../state/process.js';

export type RelayedSignal = 'SIGINT' | 'SIGQUIT' | 'SIGTERM' | 'SIGHUP';

/** The signals exec listens to while CMD runs (Windows has no SIGQUIT). */
export function relayedSignals(platform: NodeJS.Platform): RelayedSignal[] {
  return platform === 'win32' ? ['SIGINT', 'SIGTERM', 'SIGHUP'] : ['SIGINT', 'SIGQUIT', 'SIGTERM', 'SIGHUP'];
}

export interface SignalScene {
  platform: NodeJS.Platform;
  /** Ours and CMD's, read when the signal came; undefined when they cannot be read. */
  self: ProcessGroupInfo | undefined;
  child: ProcessGroupInfo | undefined;
  /** We had a controlling terminal when CMD started and have none now: it hung up. */
  terminalHungUp: boolean;
}

/** Whether a signal exec got should be sent on to CMD (see the top of this file). */
export function passesOn(signal: RelayedSignal, scene: SignalScene): boolean {
  if (scene.platform === 'win32') return false;
  if (signal === 'SIGTERM' || !scene.self || !scene.child) return true;
  const sameGroup = scene.child.pgrp === scene.self.pgrp;
  if (signal === 'SIGHUP') return !(scene.terminalHungUp && !scene.self.sessionLeader && sameGroup);
  return !(sameGroup && scene.self.pgrp === scene.self.terminalGroup);
}

/** Listens for the relayed signals while CMD runs, passing each on as passesOn says; returns the remover. */
export function relaySignals(child: ChildProcess, host: ProcessHost = systemHost): () => void {
  const hadTerminal = hasControllingTerminal();
  const onSignal = (signal: RelayedSignal): void => {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
    const scene: SignalScene = {
      platform: host.platform,
      self: signal === 'SIGTERM' ? undefined : processGroupInfo(process.pid, host),
      child: signal === 'SIGTERM' ? undefined : processGroupInfo(child.pid, host),
      terminalHungUp: signal === 'SIGHUP' && hadTerminal && !hasControllingTerminal(),
    };
    if (passesOn(signal, scene)) child.kill(signal);
  };
  const signals = relayedSignals(host.platform);
  for (const s of signals) process.on(s, onSignal);
  return () => {
    for (const s of signals) process.off(s, onSignal);
  };
}

/**
 * Signals exec dies of itself when CMD died of them. A shell that gets exit status 130 rather than
 * a death by SIGINT takes it for a CMD that handled Ctrl-C and runs on (bash's loops and scripts
 * went on after Ctrl-C); sudo dies of its command's signal too. Not the core-dumping ones (a core
 * file of node) nor those node handles itself (SIGUSR1, SIGPIPE): those exit with 128+N.
 */
const REDELIVERED: ReadonlySet<NodeJS.Signals> = new Set(['SIGHUP', 'SIGINT', 'SIGTERM', 'SIGKILL']);

/** Kills this process with `signal` when it is one of those; returns only when it did not. */
export function dieOfSignal(signal: NodeJS.Signals, platform: NodeJS.Platform = process.platform): void {
  if (platform === 'win32' || !REDELIVERED.has(signal)) return;
  // A listener would catch it instead of the default action that ends us.
  process.removeAllListeners(signal);
  try {
    process.kill(process.pid, signal);
  } catch {
    // No such signal here: the caller exits with 128+N.
  }
}
