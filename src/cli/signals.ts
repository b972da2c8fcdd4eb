// Graceful stop on the first SIGINT/SIGTERM; a second one means "now", as users expect when a
// drain takes longer than they are willing to wait.
import type { EventEmitter } from 'node:events';

const SIGNALS = ['SIGINT', 'SIGTERM'] as const;
export type ShutdownSignal = (typeof SIGNALS)[number];

/** 128 + signal number: what a shell reports for a process killed by that signal. */
export const SIGNAL_EXIT: Record<ShutdownSignal, number> = { SIGINT: 130, SIGTERM: 143 };

export interface SignalOptions {
  /** Where signals arrive; tests pass a plain EventEmitter. */
  emitter?: EventEmitter;
  exitNow?: (code: number) => void;
}

export function firstShutdownSignal(opts: SignalOptions = {}): Promise<ShutdownSignal> {
  const emitter = opts.emitter ?? process;
  const exitNow = opts.exitNow ?? ((code: number) => process.exit(code));
  return new Promise((resolve) => {
    let received = false;
    const onSignal = (signal: ShutdownSignal): void => {
      if (received) return exitNow(SIGNAL_EXIT[signal]);
      received = true;
      resolve(signal);
    };
    // Listeners stay installed: removing them would let the next signal kill us silently.
    for (const signal of SIGNALS) emitter.on(signal, onSignal);
  });
}
