// With proxy authentication on, a client that has not (yet) authenticated must not be able to
// hold connections without bound. Each source (auth/source.ts: all of loopback is one, IPv6 a
// /64, IPv4 an address) may have MAX_UNAUTHENTICATED_PER_SOURCE connections that have not
// authenticated; beyond that its oldest are evicted. Evicting rather than refusing means a
// client that hoards connections cannot lock out a newcomer from the same source (on loopback:
// every local user) — the newcomer gets in, and authenticated connections never count. Only a
// connection that has had EVICTION_GRACE_MS to authenticate is evicted: a parallel client (a
// Go program's workers, xargs -P) opens its connections at once, and the listener accepts the
// whole burst before it reads any of their credentials; up to BURST_CEILING wait for that.
import type net from 'node:net';
import type { Logger } from '../core/log.js';
import { RepeatedLineLimiter } from '../core/log-limit.js';
import { sourceBucket } from '../auth/source.js';
import { clientSource } from './server-base.js';

/** Browsers open ~6 connections per proxy, a busy machine a few dozen at once; 64 leaves room. */
export const MAX_UNAUTHENTICATED_PER_SOURCE = 64;
/** How long a new connection has to present its credentials before it may be evicted. */
export const EVICTION_GRACE_MS = 1000;
/** Beyond this many times the limit, the oldest go at once, however young. */
const BURST_CEILING = 16;

export class UnauthenticatedConnections {
  private readonly bySource = new Map<string, Set<net.Socket>>();
  private readonly sourceOf = new WeakMap<net.Socket, string>();
  private readonly admittedAt = new WeakMap<net.Socket, number>();
  private readonly sweeps = new Map<string, NodeJS.Timeout>();
  private readonly verified = new WeakSet<net.Socket>();
  private readonly lines: RepeatedLineLimiter;

  constructor(
    log: Logger,
    private readonly max = MAX_UNAUTHENTICATED_PER_SOURCE,
    private readonly graceMs = EVICTION_GRACE_MS,
  ) {
    this.lines = new RepeatedLineLimiter(log);
  }

  /** Call on accept: the socket counts against its source until it authenticates or closes. */
  admit(socket: net.Socket): void {
    const source = sourceBucket(clientSource(socket));
    let sockets = this.bySource.get(source);
    if (!sockets) this.bySource.set(source, (sockets = new Set()));
    sockets.add(socket);
    this.sourceOf.set(socket, source);
    this.admittedAt.set(socket, performance.now());
    socket.once('close', () => this.forget(socket));
    if (sockets.size <= this.max) return;
    // A flood: the oldest go at once, however young.
    if (sockets.size > this.max * BURST_CEILING) this.evict(source, sockets, () => true);
    else this.scheduleSweep(source, sockets);
  }

  /**
   * Evicts, beyond the limit, the oldest that had their grace. Always from a timer and then
   * setImmediate: the poll phase between them reads what the candidates have sent, so a busy
   * event loop (a long turn counts against the grace) cannot evict credentials it has not read.
   */
  private scheduleSweep(source: string, sockets: Set<net.Socket>): void {
    if (this.sweeps.has(source)) return;
    const oldest = sockets.values().next().value!;
    const wait = Math.max(0, this.graceMs - (performance.now() - this.admittedAt.get(oldest)!));
    const timer = setTimeout(
      () =>
        setImmediate(() => {
          this.sweeps.delete(source);
          const current = this.bySource.get(source);
          if (!current || current.size <= this.max) return;
          const now = performance.now();
          this.evict(source, current, (socket) => now - this.admittedAt.get(socket)! >= this.graceMs);
          if (current.size > this.max) this.scheduleSweep(source, current);
        }),
      wait,
    );
    timer.unref();
    this.sweeps.set(source, timer);
  }

  /** Closes the oldest beyond the limit while `may` allows; sets iterate oldest first. */
  private evict(source: string, sockets: Set<net.Socket>, may: (socket: net.Socket) => boolean): void {
    for (const oldest of sockets) {
      if (sockets.size <= this.max || !may(oldest)) return;
      this.forget(oldest);
      oldest.destroy();
      this.lines.write(
        'warn',
        `evicted|${source}`,
        { source, limit: this.max },
        `closed the oldest of ${this.max} unauthenticated connections from this source to admit a new one`,
      );
    }
  }

  /** The socket presented the right credentials: it no longer counts, and is never evicted. */
  authenticated(socket: net.Socket): void {
    this.verified.add(socket);
    this.forget(socket);
  }

  isAuthenticated(socket: net.Socket): boolean {
    return this.verified.has(socket);
  }

  /** Unauthenticated connections open from this address's source. */
  count(address: string | undefined): number {
    return this.bySource.get(sourceBucket(address))?.size ?? 0;
  }

  private forget(socket: net.Socket): void {
    const source = this.sourceOf.get(socket);
    if (source === undefined) return;
    this.sourceOf.delete(socket);
    const sockets = this.bySource.get(source);
    sockets?.delete(socket);
    if (sockets?.size !== 0) return;
    this.bySource.delete(source);
    clearTimeout(this.sweeps.get(source));
    this.sweeps.delete(source);
  }
}
