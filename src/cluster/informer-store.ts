// What an informer (informer.ts) knows of its resource: the slim records by key and the
// resourceVersion to resume from, kept as client-go's reflector keeps its store
// (staging/src/k8s.io/client-go/tools/cache/reflector.go watchHandler, syncWith): each watch event
// applied as it comes, a complete (re)list swapped in whole, with the index told what changed.
import { ApiStatusError } from './api.js';
import type { WatchEvent } from './index.js';
import type { RawWatchEvent } from './list-watch.js';
import type { Slim } from './slim.js';

export class InformerStore<T extends Slim> {
  private items = new Map<string, T>();
  /** Where a watch resumes; undefined until a list is in, and after a 410 Gone (relist). */
  resourceVersion?: string;

  constructor(
    private readonly onChange: (event: WatchEvent, obj: T, previous?: T) => void,
    private readonly slim: (raw: Record<string, any>) => T | undefined,
  ) {}

  get size(): number {
    return this.items.size;
  }

  list(): Iterable<T> {
    return this.items.values();
  }

  get(key: string): T | undefined {
    return this.items.get(key);
  }

  /** One watch event; an ERROR event is thrown as the ApiStatusError it carries. */
  apply(ev: RawWatchEvent): void {
    const rv = ev.object?.metadata?.resourceVersion;
    switch (ev.type) {
      case 'ADDED':
      case 'MODIFIED': {
        const s = this.slim(ev.object);
        if (!s) break;
        const previous = this.items.get(s.key);
        this.items.set(s.key, s);
        this.onChange(previous ? 'update' : 'add', s, previous);
        break;
      }
      case 'DELETED': {
        const s = this.slim(ev.object);
        const previous = s && this.items.get(s.key);
        if (s && previous && this.items.delete(s.key)) this.onChange('delete', s, previous);
        break;
      }
      case 'BOOKMARK':
        break;
      case 'ERROR': {
        const code = Number(ev.object?.code);
        const message = String(ev.object?.message ?? 'watch error');
        throw new ApiStatusError(code || 500, message);
      }
      default:
        return;
    }
    if (typeof rv === 'string' && rv) this.resourceVersion = rv;
  }

  /** A (re)list is complete: tell the index what changed against what we had, and keep `fresh`. */
  replace(fresh: Map<string, T>, resourceVersion: string): void {
    const before = this.items;
    for (const [k, old] of before) if (!fresh.has(k)) this.onChange('delete', old, old);
    for (const [k, s] of fresh) {
      const old = before.get(k);
      if (!old) this.onChange('add', s);
      else if (old.resourceVersion !== s.resourceVersion || !s.resourceVersion) this.onChange('update', s, old);
      else fresh.set(k, old); // unchanged: the index keeps the record it has
    }
    this.items = fresh;
    this.resourceVersion = resourceVersion;
  }
}
