import { makeInformer, type KubernetesObject, type KubeConfig, type Informer, type ObjectCache } from '@kubernetes/client-node';
import type { Logger } from '../core/log.js';
import { errorMessage } from '../core/errors.js';
import { ApiStatusError, type ApiConnection } from './api.js';

export type WatchState = 'starting' | 'synced' | 'retrying' | 'stopped';

const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 30_000;

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
  private firstSync: Promise<void>;
  private resolveFirstSync!: () => void;
  private rejectFirstSync!: (err: Error) => void;
  lastError?: Error;

  constructor(
    kc: KubeConfig,
    api: ApiConnection,
    readonly path: string,
    private readonly log: Logger,
    onChange: () => void,
  ) {
    this.firstSync = new Promise((resolve, reject) => {
      this.resolveFirstSync = resolve;
      this.rejectFirstSync = reject;
    });
    this.firstSync.catch(() => undefined);
    this.informer = makeInformer<T>(kc, path, () => api.getJson(path));
    this.informer.on('add', onChange);
    this.informer.on('update', onChange);
    this.informer.on('delete', onChange);
    this.informer.on('error', (err: unknown) => this.onError(err));
    // API servers end every watch after a while (and on restarts or load shedding); client-node
    // then resumes from the last resourceVersion by itself. Seen only at debug: it is routine.
    this.informer.on('connect', () => {
      if (this.state === 'synced') this.log.debug({ path: this.path }, 'watch ended by the API server; resuming');
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

  private onError(err: unknown): void {
    if (this.state === 'stopped') return;
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
