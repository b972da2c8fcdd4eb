// A list+watch that keeps one small value per object (the value `extract` returns), never the
// objects themselves: for resources the proxy needs a few fields of (Ingress and Route host names),
// on clusters that may hold thousands of them. The listing, watching, deadlines and recovery are
// the informer's (informer.ts, watch-recovery.ts): one watch loop for every resource, so a 410, a
// restart or a dead path is handled the same way everywhere.
import type { Logger } from '../core/log.js';
import type { ApiConnection } from './api.js';
import { ResilientInformer, WATCH_DEADLINES, type WatchDeadlines, type WatchState } from './informer.js';
import type { Slim } from './slim.js';

export type SlimWatchState = WatchState;
export type SlimWatchDeadlines = WatchDeadlines;

export interface SlimWatchOptions<V> {
  api: ApiConnection;
  /** Collection path, e.g. /apis/networking.k8s.io/v1/ingresses (no query). */
  path: string;
  log: Logger;
  /** The value kept for an object (called with each listed or watched object). */
  extract(obj: unknown): V;
  /** One object's value changed: previous undefined = new object, next undefined = gone. */
  changed(previous: V | undefined, next: V | undefined): void;
  /** A batch of changes (a list, or one watch event) is complete. */
  settled(): void;
  deadlines?: SlimWatchDeadlines;
}

interface Kept<V> extends Slim {
  readonly value: V;
}

/** Values per namespace/name, kept current by list+watch until stop(). */
export class SlimWatch<V> {
  private readonly informer: ResilientInformer<Kept<V>>;
  private readonly firstFailure: Promise<Error>;

  constructor(o: SlimWatchOptions<V>) {
    let failed!: (err: Error) => void;
    this.firstFailure = new Promise((resolve) => (failed = resolve));
    const keep = (raw: Record<string, any>): Kept<V> => {
      const meta = raw.metadata as { namespace?: string; name?: string; resourceVersion?: string } | undefined;
      const namespace = meta?.namespace ?? '';
      const name = meta?.name ?? '';
      return { key: `${namespace}/${name}`, namespace, name, resourceVersion: meta?.resourceVersion ?? '', value: o.extract(raw) };
    };
    this.informer = new ResilientInformer<Kept<V>>(
      o.api,
      o.path,
      o.log,
      (event, obj, previous) => o.changed(previous?.value, event === 'delete' ? undefined : obj.value),
      keep,
      o.deadlines ?? WATCH_DEADLINES,
      {},
      // A cluster that does not serve the resource (404) turns the source off, as a refusal does.
      { stopOn: [401, 403, 404], settled: () => o.settled(), firstFailure: failed },
    );
  }

  get status(): SlimWatchState {
    return this.informer.status;
  }

  get size(): number {
    return this.informer.size;
  }

  get lastError(): Error | undefined {
    return this.informer.lastError;
  }

  /**
   * Resolves with the first list; rejects with its error when it fails (ApiStatusError or a
   * network error). A refusal (401, 403, 404) stops the watch; any other failure is retried in the
   * background until stop().
   */
  async start(): Promise<void> {
    const synced = this.informer.start();
    const failed = this.firstFailure.then((err) => Promise.reject(err));
    failed.catch(() => undefined);
    await Promise.race([synced, failed]);
  }

  /** Watch again now from where it was (after a pause: the connection may be dead). */
  rewatch(): Promise<void> {
    return this.informer.rewatch();
  }

  stop(): void {
    void this.informer.stop();
  }
}
