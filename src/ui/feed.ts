// The live feed of one proxy, for the page (ui/page-server.ts) and for `watch` on a managed
// proxy's control socket (managed/control.ts): a snapshot, then JSON messages — streams opened,
// closed and refused (batched every FLUSH_MS), a sample a second (new connections, refusals,
// bytes each way, open streams) and the routes when their state changes. Its cost is a call per
// stream event (listeners/stream-stats.ts StreamObserver) and a timer a second; memory is bounded
// by rings of recent streams, refusals and samples, and by a cap on events waiting for a flush.
import type { Reply } from '../core/errors.js';
import type { Destination, FrontEnd } from '../core/types.js';
import { target, type StreamObserver, type StreamRecord, type StreamTotals } from '../listeners/stream-stats.js';
import type { RouteStatus } from '../routes/route.js';
import { Ring } from './ring.js';

export const RECENT_STREAMS = 200;
export const RECENT_FAILURES = 200;
/** Five minutes of one-second samples: the page's chart. */
export const SAMPLES = 300;
const SAMPLE_MS = 1_000;
const FLUSH_MS = 250;
/**
 * Events held for one flush at most; more are counted as dropped (the totals stay exact). A flush
 * that dropped a stream's open or close is a fresh snapshot instead: the page must not keep a
 * closed stream open, nor miss one that flows. Dropped refusals only thin the list of recent ones.
 */
export const MAX_PENDING = 1_000;
/**
 * A subscriber whose connection holds this much unsent (a page's event stream, a control-socket
 * watcher) is cut off; it reconnects for a fresh snapshot, and the proxy's memory stays bounded.
 */
export const MAX_UNSENT_FEED_BYTES = 4 * 1024 * 1024;
/** The open streams a snapshot lists and a sample updates the bytes of, at most. */
export const MAX_OPEN_LISTED = 500;
/** Routes are sent at least this often for their changing figures (cache counts, tunnels), besides every change of state. */
const ROUTES_REFRESH_MS = 5_000;

export interface StreamView {
  id: number;
  frontEnd: FrontEnd;
  client: string;
  /** The target as the client asked for it. */
  target: string;
  route?: string;
  /** Where it really went: the pod (namespace/pod:port), or the route's own words. */
  via: string;
  transport?: string;
  startedAt: number;
  endedAt?: number;
  bytesFromClient?: number;
  bytesToClient?: number;
  /** Why it ended abnormally. */
  error?: string;
}

export interface FailureView {
  at: number;
  frontEnd: FrontEnd;
  client: string;
  target?: string;
  reason: string;
  message: string;
  httpStatus: number;
}

export interface Sample {
  /** The second it ends (ms since the epoch). */
  t: number;
  newStreams: number;
  refused: number;
  /** Bytes in that second, each way. */
  bytesFromClients: number;
  bytesToClients: number;
  openStreams: number;
}

/** What the page shows of the proxy itself (never a password or token). */
export interface ProxyView {
  pid: number;
  startedAt: string;
  context: string;
  namespace: string;
  socks?: string;
  http?: string;
  forwards?: Array<{ listen: string; target: string }>;
  /** Clients must present the proxy's credentials. */
  auth: boolean;
  /** The ready lines' `export` lines (NO_PROXY included), a PASSWORD placeholder where credentials go. */
  env?: string[];
  pacUrl?: string;
}

export type FeedMessage =
  | {
      type: 'snapshot';
      info: ProxyView;
      routes: RouteStatus[];
      totals: StreamTotals;
      open: StreamView[];
      recent: StreamView[];
      failures: FailureView[];
      samples: Sample[];
    }
  | { type: 'events'; opened: StreamView[]; closed: StreamView[]; refused: FailureView[]; dropped: number }
  | { type: 'sample'; sample: Sample; totals: StreamTotals; live: Array<[id: number, bytesFromClient: number, bytesToClient: number]> }
  | { type: 'routes'; routes: RouteStatus[] }
  /** The proxy stops: no new connections; open streams finish within its grace. */
  | { type: 'stopping' };

export interface FeedSource {
  proxy(): ProxyView;
  routes(): RouteStatus[];
  totals(): StreamTotals;
  openRecords(): StreamRecord[];
}

export type FeedSubscriber = (message: FeedMessage) => void;

function viewOf(record: StreamRecord): StreamView {
  return {
    id: record.id,
    frontEnd: record.frontEnd,
    client: record.client,
    target: target(record.destination),
    ...(record.route !== undefined ? { route: record.route } : {}),
    via: record.via ?? '',
    ...(record.transport !== undefined ? { transport: record.transport } : {}),
    startedAt: record.startedAt,
    ...(record.live ? { bytesFromClient: record.live.bytesFromClient, bytesToClient: record.live.bytesToClient } : {}),
  };
}

const routeStates = (routes: RouteStatus[]): string => routes.map((r) => `${r.name}\0${r.state}\0${r.condition ?? ''}\0${r.reason ?? ''}`).join('\n');

export class LiveFeed implements StreamObserver {
  private readonly recent = new Ring<StreamView>(RECENT_STREAMS);
  private readonly failures = new Ring<FailureView>(RECENT_FAILURES);
  private readonly samples = new Ring<Sample>(SAMPLES);
  private readonly subscribers = new Set<FeedSubscriber>();
  private pending: Extract<FeedMessage, { type: 'events' }> = { type: 'events', opened: [], closed: [], refused: [], dropped: 0 };
  private pendingCount = 0;
  /** Opens and closes dropped since the last flush. */
  private droppedStreamEvents = 0;
  private newStreams = 0;
  private refused = 0;
  private lastBytes?: { from: number; to: number };
  private lastOpen?: number;
  private lastRoutes = '';
  private lastRoutesSentAt = 0;
  private sampler?: NodeJS.Timeout;
  private flusher?: NodeJS.Timeout;

  constructor(private readonly source: FeedSource) {}

  /** Starts the one-second samples (kept while nobody watches, so a page opened later has its chart). */
  start(): void {
    this.sampler ??= setInterval(() => this.sample(), SAMPLE_MS).unref();
  }

  stop(): void {
    clearInterval(this.sampler);
    clearInterval(this.flusher);
    this.sampler = this.flusher = undefined;
  }

  get watchers(): number {
    return this.subscribers.size;
  }

  /** Sends the snapshot at once, then every message until the returned function is called. */
  subscribe(subscriber: FeedSubscriber): () => void {
    // Events still held go to the others first: the snapshot has them, the next flush must not.
    this.flush();
    const snapshot = this.snapshot();
    subscriber(snapshot);
    if (this.subscribers.size === 0) {
      this.lastRoutes = routeStates(snapshot.routes);
      this.lastRoutesSentAt = Date.now();
    }
    this.subscribers.add(subscriber);
    this.flusher ??= setInterval(() => this.flush(), FLUSH_MS).unref();
    return () => {
      this.subscribers.delete(subscriber);
      if (this.subscribers.size > 0) return;
      clearInterval(this.flusher);
      this.flusher = undefined;
      this.clearPending();
    };
  }

  opened(record: StreamRecord): void {
    this.newStreams++;
    if (this.subscribers.size === 0) return;
    if (this.hold()) this.pending.opened.push(viewOf(record));
    else this.droppedStreamEvents++;
  }

  /** Sent as an open stream again: the page keeps open streams by id, so its row names the new pod. */
  moved(record: StreamRecord): void {
    if (this.subscribers.size === 0) return;
    if (this.hold()) this.pending.opened.push(viewOf(record));
    else this.droppedStreamEvents++;
  }

  closed(record: StreamRecord, bytesFromClient: number, bytesToClient: number, error: string | undefined): void {
    const view: StreamView = { ...viewOf(record), endedAt: Date.now(), bytesFromClient, bytesToClient, ...(error !== undefined ? { error } : {}) };
    this.recent.push(view);
    if (this.subscribers.size === 0) return;
    if (this.hold()) this.pending.closed.push(view);
    else this.droppedStreamEvents++;
  }

  failed(frontEnd: FrontEnd, client: string, destination: Destination | undefined, reply: Reply): void {
    this.refused++;
    const view: FailureView = {
      at: Date.now(),
      frontEnd,
      client,
      ...(destination ? { target: target(destination) } : {}),
      reason: reply.reason,
      message: reply.message,
      httpStatus: reply.http,
    };
    this.failures.push(view);
    if (this.subscribers.size > 0 && this.hold()) this.pending.refused.push(view);
  }

  /** One sample: what happened since the last one. Called by the timer; public for tests. */
  sample(now = Date.now()): Sample {
    const totals = this.source.totals();
    const last = this.lastBytes ?? { from: totals.bytesFromClients, to: totals.bytesToClients };
    const openBefore = this.lastOpen ?? totals.openStreams;
    this.lastOpen = totals.openStreams;
    const sample: Sample = {
      t: now,
      newStreams: this.newStreams,
      refused: this.refused,
      bytesFromClients: Math.max(0, totals.bytesFromClients - last.from),
      bytesToClients: Math.max(0, totals.bytesToClients - last.to),
      openStreams: totals.openStreams,
    };
    this.lastBytes = { from: totals.bytesFromClients, to: totals.bytesToClients };
    this.newStreams = this.refused = 0;
    this.samples.push(sample);
    if (this.subscribers.size === 0) return sample;
    this.flush();
    const live = this.source
      .openRecords()
      .slice(-MAX_OPEN_LISTED)
      .flatMap((r): Array<[number, number, number]> => (r.live ? [[r.id, r.live.bytesFromClient, r.live.bytesToClient]] : []));
    this.send({ type: 'sample', sample, totals, live });
    // Streams moved (opened, closed, carried bytes): the routes' own counts changed too.
    this.checkRoutes(now, sample.newStreams > 0 || sample.openStreams !== openBefore || sample.bytesFromClients + sample.bytesToClients > 0);
    return sample;
  }

  /** Sends the routes when a state or reason changed, their figures are ROUTES_REFRESH_MS old, or `figuresChanged`. */
  checkRoutes(now = Date.now(), figuresChanged = false): void {
    const routes = this.source.routes();
    const states = routeStates(routes);
    if (!figuresChanged && states === this.lastRoutes && now - this.lastRoutesSentAt < ROUTES_REFRESH_MS) return;
    this.lastRoutes = states;
    this.lastRoutesSentAt = now;
    this.send({ type: 'routes', routes });
  }

  /**
   * Sends the events held since the last flush (nothing when there are none). When a stream's open
   * or close had to be dropped, a fresh snapshot goes instead: a stream whose close was dropped
   * would stay open on the page for ever, and one whose open was dropped would never show.
   */
  flush(): void {
    if (this.pendingCount === 0 && this.pending.dropped === 0) return;
    const events = this.pending;
    const resync = this.droppedStreamEvents > 0;
    this.clearPending();
    this.send(resync ? this.snapshot() : events);
  }

  /** The proxy stops: subscribers hear it (what is held goes first). */
  stopping(): void {
    this.flush();
    this.send({ type: 'stopping' });
  }

  private snapshot(): Extract<FeedMessage, { type: 'snapshot' }> {
    return {
      type: 'snapshot',
      info: this.source.proxy(),
      routes: this.source.routes(),
      totals: this.source.totals(),
      open: this.source.openRecords().slice(-MAX_OPEN_LISTED).map(viewOf),
      recent: this.recent.toArray(),
      failures: this.failures.toArray(),
      samples: this.samples.toArray(),
    };
  }

  private hold(): boolean {
    if (this.pendingCount >= MAX_PENDING) {
      this.pending.dropped++;
      return false;
    }
    this.pendingCount++;
    return true;
  }

  private clearPending(): void {
    this.pending = { type: 'events', opened: [], closed: [], refused: [], dropped: 0 };
    this.pendingCount = 0;
    this.droppedStreamEvents = 0;
  }

  private send(message: FeedMessage): void {
    for (const subscriber of this.subscribers) subscriber(message);
  }
}
