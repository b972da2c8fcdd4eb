// The initial events of a streaming watch-list (KEP-3157): the current objects as ADDED events,
// ended by the bookmark annotated "k8s.io/initial-events-end", which carries the resourceVersion
// the picture is consistent at (staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go). The
// objects are slimmed as they arrive; the events after the bookmark belong to the watch.
import type { RawWatchEvent } from './list-watch.js';
import type { Slim } from './slim.js';

const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

export class InitialEvents<T extends Slim> {
  private readonly fresh = new Map<string, T>();
  private complete = false;

  constructor(
    private readonly slim: (raw: Record<string, any>) => T | undefined,
    /** Objects received so far (start-up progress). */
    private readonly listed: (count: number) => void,
    /** The whole picture and its resourceVersion, once the end bookmark came. */
    private readonly done: (fresh: Map<string, T>, resourceVersion: string) => void,
  ) {}

  get isComplete(): boolean {
    return this.complete;
  }

  /** Takes an event of the initial ones; false for what is not (later events, ERROR: the usual handling). */
  take(ev: RawWatchEvent): boolean {
    if (this.complete) return false;
    if (ev.type === 'BOOKMARK') {
      // Only the annotated bookmark ends the initial events; a plain one before it carries a
      // resourceVersion we must not resume from (the picture under it is not complete).
      if (ev.object.metadata?.annotations?.[INITIAL_EVENTS_END] !== 'true') return true;
      // Without one, the watch would resume from "" (the most recent state, replayed as ADDED):
      // objects deleted meanwhile would stay in the cache for good. A paged LIST follows instead.
      const resourceVersion: unknown = ev.object.metadata.resourceVersion;
      if (typeof resourceVersion !== 'string' || !resourceVersion) throw new Error('the initial-events-end bookmark of the watch-list has no resourceVersion');
      this.complete = true;
      this.done(this.fresh, resourceVersion);
      return true;
    }
    if (ev.type === 'ADDED' || ev.type === 'MODIFIED') {
      const s = this.slim(ev.object);
      if (s) this.fresh.set(s.key, s);
      this.listed(this.fresh.size);
      return true;
    }
    if (ev.type === 'DELETED') {
      const s = this.slim(ev.object);
      if (s) this.fresh.delete(s.key);
      return true;
    }
    return false;
  }
}
