// With proxy authentication on, a client that has not (yet) authenticated must not be able to
// hold connections without bound. Each source (auth/source.ts: all of loopback is one, IPv6 a
// /64, IPv4 an address) may have MAX_UNAUTHENTICATED_PER_SOURCE connections that have not
// authenticated; one more evicts that source's oldest. Evicting rather than refusing means a
// client that hoards connections cannot lock out a newcomer from the same source (on loopback:
// every local user) — the newcomer gets in, and authenticated connections never count.
import type net from 'node:net';
import type { Logger } from '../core/log.js';
import { RepeatedLineLimiter } from '../core/log-limit.js';
import { sourceBucket } from '../auth/source.js';
import { clientSource } from './server-base.js';

/** Browsers open ~6 connections per proxy, a busy machine a few dozen at once; 64 leaves room. */
export const MAX_UNAUTHENTICATED_PER_SOURCE = 64;

export class UnauthenticatedConnections {
  private readonly bySource = new Map<string, Set<net.Socket>>();
  private readonly sourceOf = new WeakMap<net.Socket, string>();
  private readonly verified = new WeakSet<net.Socket>();
  private readonly lines: RepeatedLineLimiter;

  constructor(
    log: Logger,
    private readonly max = MAX_UNAUTHENTICATED_PER_SOURCE,
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
    socket.once('close', () => this.forget(socket));
    if (sockets.size <= this.max) return;
    // Sets iterate in insertion order: the first is the oldest.
    const oldest = sockets.values().next().value!;
    this.forget(oldest);
    oldest.destroy();
    this.lines.write(
      'warn',
      `evicted|${source}`,
      { source, limit: this.max },
      `closed the oldest of ${this.max} unauthenticated connections from this source to admit a new one`,
    );
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
    if (sockets?.size === 0) this.bySource.delete(source);
  }
}
