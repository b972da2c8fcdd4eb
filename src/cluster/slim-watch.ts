// A list+watch that keeps one small value per object (the value `extract` returns), never the
// objects themselves: for resources the proxy needs a few fields of (Ingress and Route host names),
// on clusters that may hold thousands of them. Follows the reflector protocol of
// staging/src/k8s.io/client-go/tools/cache/reflector.go: list, then watch from the list's
// resourceVersion with bookmarks; 410 Gone (or an ERROR event) relists; a watch the server ends
// resumes from the last resourceVersion seen. Deadlines as in informer.ts (WATCH_DEADLINES): every
// watch asks for a server-side `timeoutSeconds`, and one still open well past it is on a dead path
// and is cut; the response headers must come within a limit.
import http from 'node:http';
import https from 'node:https';
import { errorMessage } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { ApiStatusError, statusMessage, type ApiConnection } from './api.js';
import { WatchBackoff } from './backoff.js';

export type SlimWatchState = 'starting' | 'synced' | 'retrying' | 'stopped';

export interface SlimWatchDeadlines {
  /** Server-side end of each watch, picked at random in [min, 2×min) per watch. */
  watchTimeoutSeconds: number;
  /** A watch still open this long after its server-side end is cut and watched again. */
  graceMs: number;
  /** Limit for the response headers of a watch request (and for a list). */
  headersTimeoutMs: number;
}

/** The same figures as informer.ts WATCH_DEADLINES (kept here so this file needs nothing of the informer's internals). */
export const SLIM_WATCH_DEADLINES: SlimWatchDeadlines = { watchTimeoutSeconds: 60, graceMs: 15_000, headersTimeoutMs: 30_000 };

/** One watch event larger than this is not something we keep host names from: the watch is cut and relisted. */
const MAX_EVENT_BYTES = 16 * 1024 * 1024;
/** A watch the server ends sooner than this after it opened is resumed after a backoff delay. */
const QUICK_END_MS = 1000;

interface Metadata {
  namespace?: string;
  name?: string;
  resourceVersion?: string;
}
interface ListDoc {
  metadata?: { resourceVersion?: string };
  items?: Array<{ metadata?: Metadata }>;
}
interface WatchEventDoc {
  type?: string;
  object?: { metadata?: Metadata; code?: number; message?: string };
}

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

/** Values per namespace/name, kept current by list+watch until stop(). */
export class SlimWatch<V> {
  private readonly values = new Map<string, V>();
  private state: SlimWatchState = 'starting';
  private resourceVersion = '';
  private readonly backoff = new WatchBackoff();
  private retryTimer?: NodeJS.Timeout;
  private request?: http.ClientRequest;
  private readonly deadlines: SlimWatchDeadlines;
  lastError?: Error;

  constructor(private readonly o: SlimWatchOptions<V>) {
    this.deadlines = o.deadlines ?? SLIM_WATCH_DEADLINES;
  }

  get status(): SlimWatchState {
    return this.state;
  }

  /** A getter, so checks after an await are not narrowed away by the compiler. */
  private get stopped(): boolean {
    return this.state === 'stopped';
  }

  get size(): number {
    return this.values.size;
  }

  /** Lists once (rejecting with ApiStatusError or a network error when that fails), then watches on. */
  async start(): Promise<void> {
    await this.list();
    if (this.stopped) return;
    this.state = 'synced';
    this.watch();
  }

  /** After a failed start: keep trying (list, then watch) with backoff until stop(). */
  retry(err: unknown): void {
    this.fail(err);
  }

  stop(): void {
    this.state = 'stopped';
    clearTimeout(this.retryTimer);
    this.request?.destroy();
    this.request = undefined;
  }

  private async list(): Promise<void> {
    const doc = await this.o.api.getJson<ListDoc>(this.o.path, this.deadlines.headersTimeoutMs);
    if (this.stopped) return;
    const seen = new Set<string>();
    for (const item of doc.items ?? []) {
      const key = keyOf(item.metadata);
      seen.add(key);
      this.set(key, this.o.extract(item));
    }
    for (const [key, previous] of [...this.values]) {
      if (seen.has(key)) continue;
      this.values.delete(key);
      this.o.changed(previous, undefined);
    }
    this.resourceVersion = doc.metadata?.resourceVersion ?? '';
    this.o.settled();
  }

  private set(key: string, next: V): void {
    const previous = this.values.get(key);
    this.values.set(key, next);
    this.o.changed(previous, next);
  }

  private async relist(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.list();
      if (this.stopped) return;
      if (this.state === 'retrying') this.o.log.info({ path: this.o.path }, 'watch recovered');
      this.state = 'synced';
      this.watch();
    } catch (err) {
      this.fail(err);
    }
  }

  private fail(err: unknown): void {
    if (this.stopped) return;
    this.lastError = err instanceof Error ? err : new Error(errorMessage(err));
    const delay = this.nextDelay();
    const fields = { path: this.o.path, error: this.lastError.message, retryInMs: delay };
    if (this.state !== 'retrying') this.o.log.warn(fields, 'watch failed, retrying with backoff');
    else this.o.log.debug(fields, 'watch still failing');
    this.state = 'retrying';
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => void this.relist(), delay);
    this.retryTimer.unref();
  }

  private nextDelay(): number {
    return this.backoff.next();
  }

  /** One watch request from the current resourceVersion; its end decides what comes next. */
  private watch(): void {
    void this.openWatch().catch((err: unknown) => this.fail(err));
  }

  private async openWatch(): Promise<void> {
    const seconds = Math.max(1, Math.round(this.deadlines.watchTimeoutSeconds * (1 + Math.random())));
    const query = new URLSearchParams({ watch: '1', allowWatchBookmarks: 'true', timeoutSeconds: String(seconds) });
    if (this.resourceVersion) query.set('resourceVersion', this.resourceVersion);
    const options = await this.o.api.requestOptions();
    if (this.stopped) return;
    const openedAt = Date.now();
    const url = this.o.api.url(`${this.o.path}?${query}`);
    const client = url.protocol === 'http:' ? http : https;
    const req = client.request(url, { ...options, method: 'GET', headers: { ...options.headers, Accept: 'application/json' } });
    this.request = req;
    let outcome: 'ended' | 'relist' | Error = 'ended';
    const cut = (why: 'relist' | Error) => {
      outcome = why;
      req.destroy();
    };
    const headersTimer = setTimeout(() => cut(new Error(`no response to the watch within ${this.deadlines.headersTimeoutMs} ms`)), this.deadlines.headersTimeoutMs);
    const deadMs = seconds * 1000 + this.deadlines.graceMs;
    const deadTimer = setTimeout(() => {
      this.o.log.warn({ path: this.o.path, afterMs: deadMs }, 'watch silent past its server-side end; the connection is presumed dead, watching again');
      cut('relist');
    }, deadMs);
    headersTimer.unref();
    deadTimer.unref();
    req.on('response', (res) => {
      clearTimeout(headersTimer);
      const status = res.statusCode ?? 0;
      if (status === 401) this.o.api.invalidate();
      if (status !== 200) {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => cut(status === 410 ? 'relist' : new ApiStatusError(status, statusMessage(Buffer.concat(chunks).toString('utf8')) ?? `HTTP ${status}`)));
        return;
      }
      let buffered = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffered += chunk;
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          const verdict = line.trim() ? this.onEvent(line) : undefined;
          if (verdict) return cut(verdict);
        }
        if (buffered.length > MAX_EVENT_BYTES) cut(new Error(`a watch event over ${MAX_EVENT_BYTES} bytes`));
      });
    });
    await new Promise<void>((resolve) => {
      req.on('error', (err) => {
        if (outcome === 'ended') outcome = err;
      });
      req.on('close', resolve);
      req.end();
    });
    clearTimeout(headersTimer);
    clearTimeout(deadTimer);
    if (this.request === req) this.request = undefined;
    if (this.stopped) return;
    if (outcome === 'ended') {
      // Routine (every watch has a server-side end). One that ends at once, again and again (a
      // proxy in the way closing it), waits like a failure so it cannot spin.
      const quick = Date.now() - openedAt < QUICK_END_MS;
      this.o.log.debug({ path: this.o.path, quick }, 'watch ended by the API server; resuming');
      if (!quick) return this.watch();
      clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => this.watch(), this.nextDelay());
      this.retryTimer.unref();
      return;
    }
    if (outcome === 'relist') {
      // 410: list again — paced like any restart, so a server that expires every watch is not
      // listed in a loop.
      clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => void this.relist(), this.nextDelay());
      this.retryTimer.unref();
      return;
    }
    this.fail(outcome);
  }

  /** Applies one event; returns why the watch must end, if it must. */
  private onEvent(line: string): 'relist' | Error | undefined {
    let event: WatchEventDoc;
    try {
      event = JSON.parse(line) as WatchEventDoc;
    } catch {
      return new Error('the watch sent a line that is not JSON');
    }
    const meta = event.object?.metadata;
    switch (event.type) {
      case 'ADDED':
      case 'MODIFIED':
        this.set(keyOf(meta), this.o.extract(event.object));
        break;
      case 'DELETED': {
        const key = keyOf(meta);
        const previous = this.values.get(key);
        if (this.values.delete(key)) this.o.changed(previous, undefined);
        break;
      }
      case 'BOOKMARK':
        break;
      case 'ERROR': {
        // 410 Expired: our resourceVersion is older than the server keeps: list again at once.
        const code = event.object?.code ?? 0;
        if (code === 410) return 'relist';
        return new ApiStatusError(code, event.object?.message ?? `watch error ${code}`);
      }
      default:
        return new Error(`unknown watch event type ${JSON.stringify(event.type)}`);
    }
    if (meta?.resourceVersion) this.resourceVersion = meta.resourceVersion;
    if (event.type !== 'BOOKMARK') this.o.settled();
    return undefined;
  }
}

function keyOf(meta: Metadata | undefined): string {
  return `${meta?.namespace ?? ''}/${meta?.name ?? ''}`;
}
