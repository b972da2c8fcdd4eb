// The waits of a watch loop between attempts (informer.ts): a plain delay, or a delay cut short
// when the API server is seen back (api-reachability.ts); either ends at once on wake() (a stop,
// or a rewatch after a pause).
import type { ApiConnection } from './api.js';
import { ApiReachability } from './api-reachability.js';

export class WakeableWait {
  private wakeNow?: () => void;

  /** Ends the wait under way, if any. */
  wake(): void {
    this.wakeNow?.();
  }

  async delay(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref();
      this.wakeNow = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wakeNow = undefined;
  }

  /** `ms`, or until the server, seen away, answers again. */
  async untilServerBack(api: ApiConnection, ms: number): Promise<void> {
    const controller = new AbortController();
    this.wakeNow = () => controller.abort();
    await ApiReachability.of(api).waitForReturn(ms, controller.signal);
    this.wakeNow = undefined;
  }
}
