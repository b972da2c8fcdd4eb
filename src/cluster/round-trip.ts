// The API round trip a route shows (`status --json`, the live page), measured on requests the
// proxy makes anyway — each watch (renewed every minute or two per watched kind) and each
// readiness probe (api-reachability.ts) — so it costs the API server nothing. It is the time from
// the request leaving on a ready connection to its response headers: the API server sends a
// watch's headers before any event, and a fresh connection's TCP and TLS handshakes are left out.
import type { ClientRequest } from 'node:http';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import type { ApiConnection } from './api.js';
import { monotonicMs } from '../core/clock.js';

export interface RoundTrip {
  ms: number;
  /** When it was measured (ms since the epoch). */
  at: number;
}

const last = new WeakMap<ApiConnection, RoundTrip>();

/** The last round trip measured to this API connection's server. */
export function lastRoundTrip(api: ApiConnection): RoundTrip | undefined {
  return last.get(api);
}

/** Notes the time to `req`'s response headers as the connection's round trip. */
export function timeRoundTrip(api: ApiConnection, req: ClientRequest): void {
  let sentAt = monotonicMs();
  req.once('socket', (socket: Socket) => {
    if (req.reusedSocket) return void (sentAt = monotonicMs());
    // A new connection: its handshakes are not the server's answer time.
    if (socket instanceof TLSSocket) socket.once('secureConnect', () => (sentAt = monotonicMs()));
    else if (socket.connecting) socket.once('connect', () => (sentAt = monotonicMs()));
  });
  req.once('response', () => last.set(api, { ms: Math.max(0, Math.round(monotonicMs() - sentAt)), at: Date.now() }));
}
