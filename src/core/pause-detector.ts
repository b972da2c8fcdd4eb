// A process that did not run for a while — a laptop asleep, SIGSTOP, a VM paused — wakes with
// every connection it held suspect: the NAT on the way may have forgotten it, the server may have
// ended it, what it pointed at may be gone. Nothing tells the process it slept: a timer that fires
// much later than asked is the signal. Both clocks are read: the monotonic one does not advance
// while a Linux or macOS machine is suspended, the wall clock does (and may jump; a jump forward
// is taken as a pause too, which only makes the proxy check what it holds).
import { performance } from 'node:perf_hooks';

export const PAUSE_CHECK_MS = 1_000;
/** A tick this much later than due is a pause. */
export const PAUSE_THRESHOLD_MS = 5_000;

export class PauseDetector {
  private timer?: NodeJS.Timeout;
  private lastWall = Date.now();
  private lastMono = performance.now();

  constructor(
    private readonly onResume: (pausedMs: number) => void,
    private readonly checkMs = PAUSE_CHECK_MS,
    private readonly thresholdMs = PAUSE_THRESHOLD_MS,
  ) {}

  start(): void {
    if (this.timer) return;
    this.lastWall = Date.now();
    this.lastMono = performance.now();
    // A timer long overdue fires in the first turn of the event loop after the pause, before
    // any connection that arrived meanwhile is accepted (libuv runs timers before polling).
    this.timer = setInterval(() => this.tick(), this.checkMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    const wall = Date.now();
    const mono = performance.now();
    const late = Math.max(wall - this.lastWall, mono - this.lastMono) - this.checkMs;
    this.lastWall = wall;
    this.lastMono = mono;
    if (late >= this.thresholdMs) this.onResume(Math.round(late));
  }
}
