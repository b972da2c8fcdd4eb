import { makeInformer, type KubernetesObject, type KubeConfig, type Informer, type ObjectCache } from '@kubernetes/client-node';
import type { Logger } from '../core/log.js';
import { errorMessage } from '../core/errors.js';
import { ApiStatusError, type ApiConnection } from './api.js';
import type { WatchEvent } from './index.js';

export type WatchState = 'starting' | 'synced' | 'retrying' | 'stopped';

const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 30_000;

export interface WatchDeadlines {
  /** The API server ends each watch after this (`timeoutSeconds`); picked at random in [min, 2×min) per informer. */
  watchTimeoutSeconds: number;
  /** A watch still open this long after its server-side end is on a dead path: cut it and watch again. */
  graceMs: number;
  /** Limit for the response headers of a watch request. */
  headersTimeoutMs: number;
}

/**
 * A watch on a connection that died silently (laptop asleep, VPN reconnected, NAT state dropped)
 * sends nothing and never ends: TCP keepalive would notice after ~11 minutes, with the caches
 * stale all along. client-go bounds every watch with a server-side `timeoutSeconds`; we do the
 * same and treat a watch that outlives it as dead. Shorter than client-go's 5–10 min: a re-watch
 * from the last resourceVersion costs the API server almost nothing, a stale route costs users.
 */
export const WATCH_DEADLINES: WatchDeadlines = { watchTimeoutSeconds: 60, graceMs: 15_000, headersTimeoutMs: 30_000 };

/**
 * client-node's Watch (watch.js) gives its fetch no timeout (a 30 s signal is built and then
 * overwritten), so a watch request whose headers never come hangs its informer for good. node-fetch
 * 2's `timeout` bounds exactly the wait for headers (it does not apply to a streamed body): we add
 * it to the options client-node builds for each watch, on a KubeConfig that inherits the rest.
 */
function withHeadersTimeout(kc: KubeConfig, api: ApiConnection, timeoutMs: number): KubeConfig {
  const scoped = Object.create(kc) as KubeConfig;
  scoped.applyToFetchOptions = async (opts) => {
    const fetchOptions = await kc.applyToFetchOptions(opts);
    // The watch leaves the way every API connection does (egress-proxy.ts: `via` a route, a
    // proxy from the environment, the extra CA): the same agent as the lists, never client-node's own.
    const { agent } = await api.requestOptions();
    return { ...fetchOptions, ...(agent ? { agent } : {}), timeout: timeoutMs } as Awaited<ReturnType<KubeConfig['applyToFetchOptions']>>;
  };
  return scoped;
}

/**
 * A client-node informer that keeps going. client-node 1.x relists by itself on 410 Gone but
 * stops for good on any other error (src/cache.ts, ListWatch.doneHandler); we restart it with
 * jittered exponential backoff and log every change of state once, not every retry.
 */
export class ResilientInformer<T extends KubernetesObject> {
  private readonly informer: Informer<T> & ObjectCache<T>;
  private state: WatchState = 'starting';
  private backoffMs = BACKOFF_MIN_MS;
  private retryTimer?: NodeJS.Timeout;
  private failuresSinceSync = 0;
  private deadlineTimer?: NodeJS.Timeout;
  /** The watch was cut by our deadline: its error is expected. */
  private cutByDeadline = false;
  private firstSync: Promise<void>;
  private resolveFirstSync!: () => void;
  private rejectFirstSync!: (err: Error) => void;
  lastError?: Error;

  constructor(
    kc: KubeConfig,
    api: ApiConnection,
    readonly path: string,
    private readonly log: Logger,
    onChange: (event: WatchEvent, obj: T) => void,
    deadlines: WatchDeadlines = WATCH_DEADLINES,
  ) {
    this.firstSync = new Promise((resolve, reject) => {
      this.resolveFirstSync = resolve;
      this.rejectFirstSync = reject;
    });
    this.firstSync.catch(() => undefined);
    const timeoutSeconds = Math.max(1, Math.round(deadlines.watchTimeoutSeconds * (1 + Math.random())));
    // The list goes through our getJson (path as given); only the watch sees the query.
    const watchPath = `${path}${path.includes('?') ? '&' : '?'}timeoutSeconds=${timeoutSeconds}`;
    this.informer = makeInformer<T>(withHeadersTimeout(kc, api, deadlines.headersTimeoutMs), watchPath, () => api.getJson(path));
    this.informer.on('add', (obj: T) => onChange('add', obj));
    this.informer.on('update', (obj: T) => onChange('update', obj));
    this.informer.on('delete', (obj: T) => onChange('delete', obj));
    this.informer.on('error', (err: unknown) => this.onError(err));
    // API servers end every watch after a while (and on restarts or load shedding); client-node
    // then resumes from the last resourceVersion by itself. Seen only at debug: it is routine.
    this.informer.on('connect', () => {
      if (this.state === 'synced') this.log.debug({ path: this.path }, 'watch ended by the API server; resuming');
      this.cutByDeadline = false;
      this.armDeadline(timeoutSeconds * 1000 + deadlines.graceMs);
    });
  }

  get status(): WatchState {
    return this.state;
  }

  /** Starts listing and watching; resolves once the first list is in, rejects if it fails. */
  start(): Promise<void> {
    void this.run();
    return this.firstSync;
  }

  list(namespace?: string): readonly T[] {
    return this.informer.list(namespace);
  }

  get(name: string, namespace?: string): T | undefined {
    return this.informer.get(name, namespace);
  }

  async stop(): Promise<void> {
    this.state = 'stopped';
    clearTimeout(this.retryTimer);
    clearTimeout(this.deadlineTimer);
    await this.informer.stop();
  }

  private async run(): Promise<void> {
    this.lastError = undefined;
    await this.informer.start();
    if (this.state === 'stopped' || this.lastError) return;
    // start() resolves after the list is in and the watch is open: that is "synced".
    if (this.state !== 'synced') {
      if (this.failuresSinceSync > 0) this.log.info({ path: this.path, failures: this.failuresSinceSync }, 'watch recovered');
      else this.log.debug({ path: this.path }, 'watch synced');
    }
    this.state = 'synced';
    this.failuresSinceSync = 0;
    this.backoffMs = BACKOFF_MIN_MS;
    this.resolveFirstSync();
  }

  /** Each (re)connect starts a new list+watch; one still running at `ms` is on a dead path. */
  private armDeadline(ms: number): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = setTimeout(() => {
      // ListWatch keeps the running watch's AbortController in `request` (client-node cache.js).
      const request = (this.informer as unknown as { request?: AbortController }).request;
      if (this.state === 'stopped' || !request) return;
      this.log.warn({ path: this.path, afterMs: ms }, 'watch silent past its server-side end; the connection is presumed dead, watching again');
      this.cutByDeadline = true;
      request.abort();
    }, ms);
    this.deadlineTimer.unref();
  }

  private onError(err: unknown): void {
    if (this.state === 'stopped') return;
    if (this.cutByDeadline) {
      this.cutByDeadline = false;
      clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => void this.run(), 0);
      return;
    }
    const error = err instanceof Error ? err : new Error(errorMessage(err));
    this.lastError = error;
    this.failuresSinceSync++;
    // A list refused for permissions will not heal by retrying: report it to the owner at once.
    if (err instanceof ApiStatusError && (err.statusCode === 403 || err.statusCode === 401) && this.state === 'starting') {
      this.rejectFirstSync(error);
      this.state = 'stopped';
      return;
    }
    const delay = Math.round(this.backoffMs * (0.8 + Math.random() * 0.4));
    this.backoffMs = Math.min(this.backoffMs * 2, BACKOFF_MAX_MS);
    if (this.state !== 'retrying') {
      this.log.warn({ path: this.path, error: error.message, retryInMs: delay }, 'watch failed, retrying with backoff');
    } else {
      this.log.debug({ path: this.path, error: error.message, retryInMs: delay }, 'watch still failing');
    }
    this.state = 'retrying';
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => void this.run(), delay);
    this.retryTimer.unref();
  }
}
