import type { Logger } from '../core/log.js';
import type { Destination, FrontEnd, OpenedStream } from '../core/types.js';
import { replyFor, type Reply } from '../core/errors.js';
import { RepeatedLineLimiter } from '../core/log-limit.js';
import { sourceBucket, UNIX_SOURCE } from '../auth/source.js';
import { clientHost } from '../core/address.js';

/** A stream's bytes so far, counted by whoever moves them (the relay): read when asked, never copied. */
export interface LiveBytes {
  readonly bytesFromClient: number;
  readonly bytesToClient: number;
}

export interface StreamRecord {
  id: number;
  frontEnd: FrontEnd;
  client: string;
  destination: Destination;
  via?: string;
  /** The routing-table route that carries it. */
  route?: string;
  /** The port-forward transport (spdy, websocket), for streams into a pod. */
  transport?: string;
  startedAt: number;
  /** Set once bytes flow: the totals include an open stream's bytes while it is open. */
  live?: LiveBytes;
}

export interface StreamTotals {
  openStreams: number;
  totalStreams: number;
  failedStreams: number;
  bytesFromClients: number;
  bytesToClients: number;
  failuresByReason: Record<string, number>;
  /** The last request that could not be served, and whether any stream opened after it (`status` says so). */
  lastFailure?: { at: string; reason: string; message: string; target?: string; openedSince: boolean };
}

/** The totals of a proxy that has carried nothing yet (a daemon still starting shows these). */
export function noStreams(): StreamTotals {
  return { openStreams: 0, totalStreams: 0, failedStreams: 0, bytesFromClients: 0, bytesToClients: 0, failuresByReason: {} };
}

/** One route's share of the totals (for `status`). */
export interface RouteTotals {
  openStreams: number;
  totalStreams: number;
  bytesFromClients: number;
  bytesToClients: number;
}

/**
 * Told of each stream as it opens and ends and of each refusal (the live page's feed,
 * ui/feed.ts): a call per stream, never per byte or chunk.
 */
export interface StreamObserver {
  opened(record: StreamRecord): void;
  /** The stream moved to another endpoint before the pod spoke: `record.via` names the new one. */
  moved(record: StreamRecord): void;
  /** `error`: why it ended abnormally (the reply's message), undefined for a normal end. */
  closed(record: StreamRecord, bytesFromClient: number, bytesToClient: number, error: string | undefined): void;
  failed(frontEnd: FrontEnd, client: string, destination: Destination | undefined, reply: Reply): void;
}

/** The source bucket (auth/source.ts) of a "host:port" / "[v6]:port" client text. */
function sourceOfClient(client: string): string {
  return client === UNIX_SOURCE ? UNIX_SOURCE : sourceBucket(clientHost(client));
}

function addLive(totals: { bytesFromClients: number; bytesToClients: number }, record: StreamRecord): void {
  if (!record.live) return;
  totals.bytesFromClients += record.live.bytesFromClient;
  totals.bytesToClients += record.live.bytesToClient;
}

export function target(d: Destination): string {
  return d.type === 'ipv6' ? `[${d.host}]:${d.port}` : `${d.host}:${d.port}`;
}

/**
 * The one place that counts streams and writes the per-stream log lines (open, close with bytes
 * and duration, failure with its reason), so every front end reports the same way.
 */
export class StreamStats {
  private nextId = 1;
  private readonly open = new Map<number, StreamRecord>();
  private readonly totals: StreamTotals = noStreams();

  /** Failure lines are one per request: a client must not be able to flood the log with them. */
  private readonly failureLines: RepeatedLineLimiter;

  /** Set by whoever shows streams live (one observer: the proxy's feed). */
  observer?: StreamObserver;

  constructor(private readonly log: Logger) {
    this.failureLines = new RepeatedLineLimiter(log);
  }

  private readonly byRoute = new Map<string, RouteTotals>();

  /** Call when a stream to the destination is open and bytes are about to flow. */
  opened(frontEnd: FrontEnd, client: string, destination: Destination, via: string, route?: string, transport?: string): StreamRecord {
    const record: StreamRecord = { id: this.nextId++, frontEnd, client, destination, via, route, transport, startedAt: Date.now(), live: undefined };
    this.open.set(record.id, record);
    if (this.totals.lastFailure) this.totals.lastFailure.openedSince = true;
    this.totals.openStreams = this.open.size;
    this.totals.totalStreams++;
    const r = this.routeTotals(route);
    if (r) {
      r.openStreams++;
      r.totalStreams++;
    }
    this.log.info({ stream: record.id, frontEnd, client, target: target(destination), via, route, transport }, 'stream open');
    this.observer?.opened(record);
    return record;
  }

  /** Follows the stream to the endpoint it moves to, if it does (OpenedStream.onMove). */
  follow(record: StreamRecord, opened: Pick<OpenedStream, 'onMove'>): void {
    opened.onMove?.((via) => {
      if (!this.open.has(record.id)) return;
      this.log.debug({ stream: record.id, from: record.via, to: via }, 'stream moved');
      record.via = via;
      this.observer?.moved(record);
    });
  }

  private routeTotals(route: string | undefined): RouteTotals | undefined {
    if (route === undefined) return undefined;
    let r = this.byRoute.get(route);
    if (!r) this.byRoute.set(route, (r = { openStreams: 0, totalStreams: 0, bytesFromClients: 0, bytesToClients: 0 }));
    return r;
  }

  /** Streams and bytes of one route (zeros for a route that carried none). */
  forRoute(route: string): RouteTotals {
    const totals = { ...(this.byRoute.get(route) ?? { openStreams: 0, totalStreams: 0, bytesFromClients: 0, bytesToClients: 0 }) };
    for (const record of this.open.values()) if (record.route === route) addLive(totals, record);
    return totals;
  }

  /** Call once when both directions are done (or torn down); `error` only for abnormal ends. */
  closed(record: StreamRecord, bytesFromClient: number, bytesToClient: number, error?: unknown): void {
    if (!this.open.delete(record.id)) return;
    this.totals.openStreams = this.open.size;
    this.totals.bytesFromClients += bytesFromClient;
    this.totals.bytesToClients += bytesToClient;
    const r = this.routeTotals(record.route);
    if (r) {
      r.openStreams--;
      r.bytesFromClients += bytesFromClient;
      r.bytesToClients += bytesToClient;
    }
    const fields = {
      stream: record.id,
      frontEnd: record.frontEnd,
      target: target(record.destination),
      via: record.via,
      bytesFromClient,
      bytesToClient,
      durationMs: Date.now() - record.startedAt,
    };
    const message = error ? replyFor(error).message : undefined;
    if (message !== undefined) this.log.info({ ...fields, error: message }, 'stream closed with error');
    else this.log.info(fields, 'stream closed');
    this.observer?.closed(record, bytesFromClient, bytesToClient, message);
  }

  /** Call when a request could not be served; returns the reply to send. `info` for an expected refusal (a 407 challenge). */
  failed(frontEnd: FrontEnd, client: string, destination: Destination | undefined, err: unknown, level: 'warn' | 'info' = 'warn'): Reply {
    const reply = replyFor(err);
    this.totals.failedStreams++;
    this.totals.failuresByReason[reply.reason] = (this.totals.failuresByReason[reply.reason] ?? 0) + 1;
    const to = destination ? { target: target(destination) } : {};
    // An expected refusal (the 407 challenge clients wait for before sending credentials) is not
    // what `status` names as the last failed stream: the client comes back with them.
    if (level === 'warn') this.totals.lastFailure = { at: new Date().toISOString(), reason: reply.reason, message: reply.message, ...to, openedSince: false };
    this.failureLines.write(
      level,
      `${reply.reason}|${sourceOfClient(client)}${level === 'warn' ? '' : `|${level}`}`,
      { frontEnd, client, target: destination ? target(destination) : undefined, reason: reply.reason, socksReply: reply.socks, httpStatus: reply.http },
      `stream failed: ${reply.message}`,
    );
    this.observer?.failed(frontEnd, client, destination, reply);
    return reply;
  }

  /** The totals, open streams' bytes so far included (closed() adds their final counts instead). */
  snapshot(): StreamTotals {
    const last = this.totals.lastFailure;
    const totals = { ...this.totals, failuresByReason: { ...this.totals.failuresByReason }, ...(last ? { lastFailure: { ...last } } : {}) };
    for (const record of this.open.values()) addLive(totals, record);
    return totals;
  }

  /** At stop: the failure lines held back are summed up now (their window's timer does not hold the exit). */
  flushLog(): void {
    this.failureLines.flush();
  }

  openRecords(): StreamRecord[] {
    return [...this.open.values()];
  }
}
