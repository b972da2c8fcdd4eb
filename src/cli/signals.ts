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

/**
 * Until `start` settles, SIGINT and SIGTERM end the process as their default actions do. As PID 1
 * (a container's entrypoint with no init) the kernel drops a signal that has no handler, so a
 * `docker stop` or a pod's deletion while the API server was slow went unheard until the start
 * was over (10 s and more), and exec then ran CMD regardless.
 */
export async function endOnSignalWhile<T>(start: Promise<T>, opts: SignalOptions = {}): Promise<T> {
  const emitter = opts.emitter ?? process;
  const exitNow = opts.exitNow ?? ((code: number) => process.exit(code));
  const onSignal = (signal: ShutdownSignal): void => {
    for (const s of SIGNALS) emitter.off(s, onSignal);
    // Died of the signal, as without a handler; PID 1 is still here after it and exits 128+N.
    if (emitter === process) process.kill(process.pid, signal);
    exitNow(SIGNAL_EXIT[signal]);
  };
  for (const signal of SIGNALS) emitter.on(signal, onSignal);
  try {
    return await start;
  } finally {
    for (const signal of SIGNALS) emitter.off(signal, onSignal);
  }
}
