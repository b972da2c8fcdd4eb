// Ctrl-C on `connect`: a start the user gave up on is undone, not left serving behind them.
import { constants } from 'node:os';
import { StartupError } from '../core/errors.js';

/**
 * SIGINT and SIGTERM while connect holds the lock or waits for its daemon, kept until the next
 * step acts on them (the daemon runs in its own session: the terminal's Ctrl-C never reaches it).
 * A second one ends connect at once.
 */
export class Interrupts {
  received?: NodeJS.Signals;
  private armed = false;
  private readonly onSignal = (signal: NodeJS.Signals) => {
    if (this.received) process.exit(exitCodeOf(signal));
    this.received = signal;
  };

  arm(): void {
    if (this.armed) return;
    this.armed = true;
    for (const signal of INTERRUPTS) process.on(signal, this.onSignal);
  }

  check(): void {
    if (this.received) throw new ConnectInterrupted(this.received, 'nothing was started');
  }

  dispose(): void {
    for (const signal of INTERRUPTS) process.off(signal, this.onSignal);
  }
}

const INTERRUPTS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];

/** 128 + the signal's number, as a shell reports a process that died of it. */
function exitCodeOf(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/** connect given up on (Ctrl-C, SIGTERM): exits as the signal would. */
export class ConnectInterrupted extends StartupError {
  readonly exitCode: number;
  constructor(signal: NodeJS.Signals, what: string) {
    super(`connect was interrupted (${signal}): ${what}`);
    this.name = 'ConnectInterrupted';
    this.exitCode = exitCodeOf(signal);
  }
}
