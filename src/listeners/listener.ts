import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../core/log.js';
import type { StreamOpener } from '../core/types.js';
import type { StreamStats } from './stream-stats.js';
import type { ProxyAuth } from '../auth/credentials.js';
import type { ConnectionBudget } from './connection-budget.js';

/** What every front end (SOCKS, HTTP) needs from the proxy core. */
export interface ListenerContext {
  opener: StreamOpener;
  stats: StreamStats;
  log: Logger;
  /** A client must finish its greeting/request head within this time, or it is dropped. */
  handshakeTimeoutMs: number;
  /** Proxy credentials every client must present (SOCKS5 RFC 1929, HTTP Basic); none when undefined. */
  auth?: ProxyAuth;
  /** The PAC file for this proxy (served at /proxy.pac on the HTTP listener), for a browser that reached this machine at `reachedAt`. */
  pac?: (reachedAt?: string) => string;
  /** Client connections all listeners together may hold (connection-budget.ts); no bound when undefined. */
  connections?: ConnectionBudget;
  /** The live page (ui/page-server.ts) on the HTTP listener: the requests it claims, served under its own access rules. */
  page?: { claims(req: IncomingMessage): boolean; serve(req: IncomingMessage, res: ServerResponse): void };
}

export interface Listener {
  readonly kind: 'socks' | 'http' | 'forward';
  /** The bound address; for a unix socket family 'unix', address the path, port 0 (unix-socket.ts). */
  readonly address: AddressInfo;
  /** Number of client connections currently open on this listener. */
  connections(): number;
  /** Stop accepting at once; let open connections run for up to graceMs, then destroy them. */
  close(graceMs: number): Promise<void>;
}
